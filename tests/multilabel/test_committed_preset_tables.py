"""The committed tables of runs made outside the pipeline (reports/metrics/multilabel_bibtex/,
presets/multilabel-bibtex.yaml; reports/metrics/multilabel_tmc_full/,
presets/multilabel-tmc-full.yaml) are what scripts/multilabel_table.py computes from the
committed runs, and every interval they show contains its estimate and has simulated coverage
within the target at the set's shape."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
R = ROOT / "reports" / "metrics"
M = R / "multilabel_bibtex"
T = R / "multilabel_tmc_full"
spec = importlib.util.spec_from_file_location("ml_table", ROOT / "scripts" / "multilabel_table.py")
ml_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ml_table)

TABLES = {"default_table.json": ["default"], "tuned_table.json": ["tuned"],
          "combined_table.json": ["tuned", "default"], "steps2000_table.json": ["steps2000", "default"]}
# (table, folders, data set, coverage file): each preset folder's own simulation at its set's
# shape and operating point (tmc2007-500 on all training rows: the same 7,077 test rows as the
# default set, but better models, so its F1 operating point is its own)
# both also: the tuned rows with contrastive pre-training then BCE fine-tuning (hybrid_ft)
TABLES["hybrid_table.json"] = ["hybrid", "tuned", "default"]
# bibtex only: hybrid_ft with the 2,000-step cap (the cap its validation mAP picks)
TABLES["hybrid2000_table.json"] = ["hybrid2000", "tuned", "default"]
#: every committed bibtex study choice (studies/<row>.json)
STUDIES = sorted((M / "studies").glob("*.json"))
CASES = [(M / n, [M / d for d in dirs], "bibtex", M / "coverage.json") for n, dirs in TABLES.items()]
CASES += [(T / n, [T / d for d in dirs], "tmc2007-500", T / "coverage.json")
          for n, dirs in TABLES.items() if n not in ("steps2000_table.json", "hybrid2000_table.json")]


@pytest.mark.parametrize("table, dirs, dataset, coverage", CASES, ids=lambda x: getattr(x, "name", x))
def test_committed_table_is_recomputed_from_the_committed_runs(table, dirs, dataset, coverage):
    committed = json.loads(table.read_text())
    name = table.name
    fresh = json.loads(json.dumps(ml_table.table(dirs, dataset, coverage=coverage)))
    assert fresh["baseline"] == committed["baseline"] and fresh["n_seeds"] == committed["n_seeds"]
    assert fresh["frequent_k"] == committed["frequent_k"]
    assert set(fresh["rows"]) == set(committed["rows"])
    for row, cells in committed["rows"].items():
        for key, c in cells.items():
            f = fresh["rows"][row][key]
            for field in ("mean", "ci_low", "ci_high", "delta", "p_holm"):
                if c[field] is None:
                    assert f[field] is None, (name, row, key, field)
                else:
                    assert f[field] == pytest.approx(c[field], rel=1e-9, abs=1e-12), (name, row, key, field)
            assert (f["above"], f["below"], f["no_ci"]) == (c["above"], c["below"], c["no_ci"])


@pytest.mark.parametrize("table, dirs, dataset, coverage", CASES, ids=lambda x: getattr(x, "name", x))
def test_committed_intervals_contain_their_estimates_and_cover(table, dirs, dataset, coverage):
    cov = json.loads(coverage.read_text())[dataset]
    assert cov
    t = json.loads(table.read_text())
    # the coverage entry that licenses each column's interval (map: the plain mAP, k = 1)
    licence = {"map": "map_min1pos", "map_frequent": f"map_min{t['frequent_k']}pos"}
    for row, cells in t["rows"].items():
        for key, c in cells.items():
            if c["ci_low"] is not None:
                # printed only where the simulated coverage lies in the target
                assert 0.92 <= cov[licence.get(key, key)] <= 0.98, (table.name, row, key)
                assert c["ci_low"] <= c["mean"] <= c["ci_high"], (table.name, row, key)
            elif key.startswith("map") and dataset == "bibtex":
                assert c["no_cover"]  # no k covers at bibtex's shape: no mAP interval


@pytest.mark.parametrize("folder", ["steps2000", "hybrid2000"])
def test_step_cap_runs_ran_with_the_2000_step_cap(folder):
    runs = sorted((M / folder).glob("bibtex_*.json"))
    assert runs
    for run in runs:
        cfg = json.loads(run.read_text())["config"]
        assert cfg["max_steps"] == 2000, run.name


@pytest.mark.parametrize("choice", STUDIES, ids=lambda p: p.stem)
def test_committed_study_choice_is_its_journals_best(choice, tmp_path):
    """Each committed bibtex choice (studies/<row>.json) is what its committed Optuna journal
    (reports/tune/multilabel_bibtex/<row>/journal.log) says: the budget of complete trials
    and the best trial, its value and its configuration."""
    import shutil

    import optuna
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    doc = json.loads(choice.read_text())
    d = doc["datasets"]["bibtex"]
    journal = ROOT / "reports" / "tune" / "multilabel_bibtex" / choice.stem / "journal.log"
    shutil.copy(journal, tmp_path / "journal.log")  # the backend may write beside the file
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(tmp_path / "journal.log")))
    study = optuna.load_study(study_name=d["study"], storage=storage)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    assert len(complete) == d["n_complete"] == doc["budget_trials"]
    best = max(complete, key=lambda t: t.value)
    assert best.number == d["best_trial"]
    assert best.value == pytest.approx(d["best_value"], abs=1e-6)
    for k, v in d["params"].items():
        assert best.params[k] == (pytest.approx(v, abs=1e-6) if isinstance(v, float) else v), k


@pytest.mark.parametrize("choice", STUDIES, ids=lambda p: p.stem)
def test_every_committed_study_choice_has_its_final_runs(choice):
    """A row with a committed bibtex study appears in the tuned table with that study's choice
    (not its declared values) and as many seeds as its declared-values run: a study whose final
    runs were not made, or were made with another configuration, fails here."""
    params = json.loads(choice.read_text())["datasets"]["bibtex"]["params"]
    run = M / "tuned" / f"bibtex_{choice.stem}.json"
    assert run.exists(), f"{choice.stem}: study committed, final runs missing ({run.name})"
    tuned = json.loads(run.read_text())
    assert tuned["tuned"] == params, choice.stem
    assert tuned["tuned_source"].startswith("tuned on bibtex"), tuned["tuned_source"]
    default = json.loads((M / "default" / run.name).read_text())
    assert tuned["n_seeds"] == default["n_seeds"], choice.stem
    assert choice.stem in json.loads((M / "tuned_table.json").read_text())["rows"], choice.stem
