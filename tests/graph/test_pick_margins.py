"""The graph track's validation picks and their margins: the record of a count criterion by
hand, and the committed runs that must record them (the probe's and the baselines' records:
tests/graph/test_baselines_probe.py; the supervised references' early-stopping epoch:
tests/graph/test_supervised.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastlab.evaluation.picks import FRAGILE_SHARE, count_pick_record

ROOT = Path(__file__).resolve().parents[2]


def test_count_pick_record_by_hand():
    r = count_pick_record("acc", [0.1, 1.0, 10.0, 100.0], [10, 15, 12, 12], 1, 500)
    # the gap to the best other candidate (the first of the two with 12), in items
    assert (r["chosen"], r["runner_up"], r["margin"], r["n_val"]) == (1.0, 10.0, 3, 500)
    assert r["fragile"]  # 3 < 1 % of 500
    tie = count_pick_record("acc", [1, 2, 3], [7, 9, 9], 2, 10)  # a tie-break kept epoch 3
    assert (tie["runner_up"], tie["margin"], tie["fragile"]) == (2, 0, True)
    wide = count_pick_record("acc", [1, 2], [80, 20], 0, 100)
    assert (wide["margin"], wide["fragile"]) == (60, False)
    one = count_pick_record("acc", [[2, "l2", 0.1]], [5], 0, 9)
    assert (one["runner_up"], one["margin"], one["chosen"]) == (None, 9, [2, "l2", 0.1])
    with pytest.raises(ValueError):
        count_pick_record("acc", [1, 2], [3], 0, 10)
    with pytest.raises(ValueError):
        count_pick_record("acc", [1, 2], [3, 4], 2, 10)


def _records(path: Path):
    m = json.loads(path.read_text())
    return m if "logreg_acc_mean" not in m else {path.stem: m}


def _check(es: dict, chosen: list, where: str) -> None:
    assert es["chosen_seed"] == chosen, f"{where}: recorded picks {es['chosen_seed']} vs {chosen}"
    assert len(es["margin_seed"]) == len(chosen) and min(es["margin_seed"]) >= 0, where
    assert es["fragile_seeds"] == sum(x < FRAGILE_SHARE * es["n_val"] for x in es["margin_seed"]), where
    assert es["n_val"] == 500, where  # Cora's public validation split


def test_every_committed_graph_pick_records_its_margin():
    """A committed graph run whose linear-probe C, baseline configuration or early-stopping
    epoch has no margin per seed fails here."""
    seen = 0
    for f in sorted((ROOT / "reports" / "metrics" / "graph").rglob("*.json")):
        for name, m in _records(f).items():
            where = f"{f.relative_to(ROOT)}:{name}"
            picks = m.get("picks") or {}
            if "probe_C" in m:
                assert "C" in picks, f"{where}: the probe's C without its margin"
                _check(picks["C"], m["probe_C"], where)
            if "chosen_epoch" in m:
                assert "early_stopping" in picks, f"{where}: early stopping without its margin"
                _check(picks["early_stopping"], m["chosen_epoch"], where)
            if "K" in m or "normalize" in m:
                conf = picks["configuration"]
                _check(conf, [[m.get("K", 0), m["normalize"], m["C"]]], where)
            if name == "random_gcn":
                assert len(picks["C"]["margin_seed"]) == m["n_seeds"], where
            seen += bool(picks)
    assert seen >= 3 * 3 + 3 + 3  # final, default, ablation of 3 variants; 3 baselines; 3 references


def test_the_committed_graph_studies_are_named_by_the_log_loss_trial_rule():
    """The final runs' probe criterion (graph.probe.criterion) never enters a study's
    identity; the trials' rule (graph.tune.probe_criterion) enters it unless it is accuracy,
    the rule of the studies run before the setting existed (their journals still resume). The
    committed choices come from the log-loss studies, and accuracy names other (older) ones."""
    from optuna import get_all_study_names
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from contrastlab.params import load_params
    from contrastlab.training.graph_tune import study_fixed, trial_probe
    from contrastlab.tuning.space import study_name

    g = load_params(ROOT / "params.yaml").graph
    assert g.tune.probe_criterion == "log_loss" and g.probe.criterion == "log_loss"
    assert trial_probe(g).criterion == "log_loss"
    for v in g.variants:
        tuned = json.loads((ROOT / "reports/tuned/graph" / f"{v}.json").read_text())
        space = g.variants[v].search
        assert study_name("graph", v, space, study_fixed(g, v)) == tuned["study"]
        g_acc = g.model_copy(update={"tune": g.tune.model_copy(update={"probe_criterion": "accuracy"})})
        assert "criterion" not in study_fixed(g_acc, v)["probe"]
        old = study_name("graph", v, space, study_fixed(g_acc, v))
        journal = JournalStorage(JournalFileBackend(str(ROOT / "reports/tune/graph" / v / "journal.log")))
        assert old != tuned["study"] and {old, tuned["study"]} <= set(get_all_study_names(journal))
        g_final = g.model_copy(update={"probe": g.probe.model_copy(update={"criterion": "accuracy"})})
        assert study_fixed(g_final, v) == study_fixed(g, v)
