"""The multi-label stage scripts end to end on the real yeast files with tiny settings."""

import json
from pathlib import Path

import pytest
import yaml

from _stagerun import run_stage_here

from contrastlab.utils import repo_root

ROOT = repo_root(Path(__file__).parent)


def _params(tmp: Path, **train) -> Path:
    p = {"multilabel": {
        "datasets": ["yeast"], "losses": ["bce", "mulsupcon", "extratrees"], "seeds": [0, 1, 2],
        "vendor_root": str(ROOT / "data" / "vendor" / "mulan"), "optional_root": str(tmp / "none"),
        "data": {"yeast": {"max_train": 300}},
        "train": {"hidden": [16], "enc_dim": 16, "proj_dim": 8, "batch_size": 64, "max_steps": 20,
                  "eval_every": 10, "workers": 2, **train},
        # every fold computed (the schema default prunes; the pruned search has its own test)
        "tune": {"trials": 2, "startup_trials": 1, "datasets": ["yeast"], "pruner": "none",
                 # the track's default space, which each variant inherits key by key
                 "search": {"temperature": {"type": "float", "low": 0.1, "high": 0.5}}},
        "variants": {"simdis": {},  # its kwargs: the variant table's (losses/variants.yaml)
                     "mulsupcon": {"search": {"temperature": {"type": "float", "low": 0.05, "high": 1.0, "log": True}}},
                     "extratrees": {"model": {"n_estimators": 10},
                                    "search": {"max_depth": {"type": "categorical", "choices": [0, 2, 4]},
                                               "min_samples_leaf": {"type": "int", "low": 1, "high": 8}}}},
    }}
    f = tmp / "params.yaml"
    f.write_text(yaml.safe_dump(p))
    return f


def _run(args, cwd):
    """A stage script's ``main`` in this process, in ``cwd`` (tests/_stagerun.py)."""
    return run_stage_here(args[0], args[1:], cwd)


@pytest.mark.slow
def test_build_tune_train_weights_report_on_yeast(tmp_path, stage_cmd):
    params = _params(tmp_path)
    r = _run([*stage_cmd("build_multilabel@yeast"), "--params", str(params)], tmp_path)
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "data/multilabel/yeast/meta.json").read_text())
    assert meta["train"]["n"] + meta["val"]["n"] == 300 and meta["train_full"] == 1500 and meta["test"]["n"] == 917
    assert len(meta["labels"]) == 14
    for v in ("mulsupcon", "bce"):
        r = _run([*stage_cmd(f"tune_multilabel@{v}"), "--params", str(params)], tmp_path)
        assert r.returncode == 0, r.stderr
    tuned_all = json.loads((tmp_path / "reports/tuned/multilabel/mulsupcon.json").read_text())
    tuned = tuned_all["datasets"]["yeast"]
    assert set(tuned["params"]) == {"temperature"} and tuned["n_complete"] == 2
    assert tuned["default_params"] == {"temperature": 0.07}  # trial 0 = the params.yaml value
    hist = (tmp_path / "reports/plots/tune/multilabel/mulsupcon.csv").read_text().splitlines()
    assert hist[0].startswith("dataset,trial") and hist[1].startswith("yeast,0,COMPLETE") and len(hist) == 3
    assert float(hist[1].split(",")[-1]) == 0.07
    assert (tmp_path / "reports/tune/multilabel/mulsupcon/journal.log").exists()
    assert json.loads((tmp_path / "reports/tuned/multilabel/bce.json").read_text())["params"] == {}
    # the forest's selection reads no test row: a poisoned test split gives the same study
    import numpy as np
    from safetensors.numpy import load_file, save_file

    f = tmp_path / "data/multilabel/yeast/data.safetensors"
    clean = load_file(str(f))
    poisoned = dict(clean, x_test=np.full_like(clean["x_test"], np.nan), y_test=1 - clean["y_test"])
    got = []
    for arrays, sub in ((poisoned, "p"), (clean, "c")):
        save_file(arrays, str(f))
        r = _run([*stage_cmd("tune_multilabel@extratrees"), "--params", str(params),
                  "--tuned-dir", f"t{sub}", "--study-dir", f"s{sub}", "--plots-dir", f"h{sub}"], tmp_path)
        assert r.returncode == 0, r.stderr
        got.append(json.loads((tmp_path / f"t{sub}/extratrees.json").read_text())["datasets"]["yeast"])
    assert got[0]["best_value"] == got[1]["best_value"] and got[0]["params"] == got[1]["params"]
    assert got[0]["params"]["max_depth"] in (0, 2, 4) and 1 <= got[0]["params"]["min_samples_leaf"] <= 8
    for v in ("mulsupcon", "bce"):
        r = _run([*stage_cmd("train_multilabel", dataset="yeast", loss=v),
                  "--params", str(params)], tmp_path)
        assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "reports/metrics/multilabel/yeast_mulsupcon.json").read_text())
    assert m["n_seeds"] == 3 and 0 < m["micro_f1"] <= 1 and "time_s" not in m
    assert m["tuned"] == tuned["params"] and m["config"]["temperature"] == pytest.approx(tuned["params"]["temperature"])
    assert m["tuned_source"].startswith("tuned on yeast") and len(m["test_scores_sha256"]) == 3
    assert {f"map_seed{s}" for s in range(3)} <= set(m) and "macro_f1_val_t" in m
    import numpy as np

    with np.load(tmp_path / "reports/metrics/multilabel/reps/yeast_mulsupcon.npz") as z:
        assert z["map"].shape == (1000,) and abs(float(np.median(z["map"])) - m["map"]) < 0.05
    csv = (tmp_path / "reports/plots/multilabel/yeast_mulsupcon.csv").read_text().splitlines()
    assert csv[0] == "seed,step,loss,val_map" and len(csv) == 1 + 3 * 2
    r = _run([*stage_cmd("multilabel_weights@yeast")], tmp_path)
    assert r.returncode == 0, r.stderr
    rel = json.loads((tmp_path / "reports/data/multilabel/yeast_simdis_relations.json").read_text())
    n = meta["train"]["n"]
    assert rel["n_pairs"] == n * (n - 1)
    assert sum(rel[f"R{i}_pairs"] for i in range(1, 6)) == rel["n_pairs"]
    assert rel["R1_weight_mean"] == 0.0 and rel["R2_weight_mean"] == 1.0
    from contrastlab.reporting.multilabel import build_section

    s = build_section(tmp_path, tmp_path / "figs")
    titles = [t.title for t in s.tables]
    assert "yeast: Table 1 format (test, %)" in titles
    assert all(f.path.exists() for f in s.figures)


@pytest.mark.slow
def test_hyperband_pruned_search_is_its_own_study(tmp_path, stage_cmd):
    """multilabel.tune.pruner: hyperband over the folds (step = folds done, as graph and code
    prune over seeds): trials are pruned after one fold, the winner is a COMPLETE trial, the
    study is named apart from the unpruned one (whose journal it shares), and a max_resource
    other than the folds is refused."""
    import optuna

    params = _params(tmp_path)
    r = _run([*stage_cmd("build_multilabel@yeast"), "--params", str(params)], tmp_path)
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load(params.read_text())
    doc["multilabel"]["tune"].update(trials=9, startup_trials=2)
    params.write_text(yaml.safe_dump(doc))
    args = [*stage_cmd("tune_multilabel@extratrees"), "--params", str(params)]
    assert _run(args, tmp_path).returncode == 0
    unpruned = json.loads((tmp_path / "reports/tuned/multilabel/extratrees.json").read_text())["datasets"]["yeast"]
    assert "n_pruned" not in unpruned and unpruned["n_complete"] == 9
    doc["multilabel"]["tune"].update(pruner="hyperband", min_resource=1, max_resource=3, reduction_factor=3)
    params.write_text(yaml.safe_dump(doc))
    r = _run(args, tmp_path)
    assert r.returncode == 0, r.stderr
    pruned = json.loads((tmp_path / "reports/tuned/multilabel/extratrees.json").read_text())["datasets"]["yeast"]
    assert pruned["study"] != unpruned["study"]
    assert pruned["n_pruned"] >= 1 and pruned["n_complete"] + pruned["n_pruned"] + pruned["n_failed"] == 9
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(
        str(tmp_path / "reports/tune/multilabel/extratrees/journal.log")))
    names = {s.study_name for s in optuna.get_all_study_summaries(storage)}
    assert names == {pruned["study"], unpruned["study"]}  # the old study is kept beside it
    study = optuna.load_study(study_name=pruned["study"], storage=storage)
    states = {t.number: t.state for t in study.trials}
    assert states[pruned["best_trial"]] == optuna.trial.TrialState.COMPLETE
    for t in study.trials:  # steps are folds done; the last fold is not reported, so a pruned
        # trial stopped after fold 1 or 2 and no fully computed trial is thrown away
        steps = sorted(t.intermediate_values)
        assert steps in ([1], [1, 2])
        assert t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert steps == [1, 2]
    doc["multilabel"]["tune"]["max_resource"] = "auto"  # = folds: the same study, complete
    params.write_text(yaml.safe_dump(doc))
    assert _run(args, tmp_path).returncode == 0
    again = json.loads((tmp_path / "reports/tuned/multilabel/extratrees.json").read_text())["datasets"]["yeast"]
    assert again == pruned
    doc["multilabel"]["tune"]["max_resource"] = 5
    params.write_text(yaml.safe_dump(doc))
    r = _run(args, tmp_path)
    assert r.returncode == 2 and "max_resource" in r.stderr and "3 folds" in r.stderr


def test_user_csv_dataset_end_to_end(tmp_path, stage_cmd):
    """A user's CSV data set named in params goes through build -> train -> metrics."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    (tmp_path / "mine").mkdir()
    w = rng.normal(size=(3, 5))
    for split, n in (("train", 80), ("test", 40)):
        y = (rng.random((n, 3)) < 0.4).astype(int)
        y[y.sum(1) == 0, 0] = 1
        x = y @ w + 0.3 * rng.normal(size=(n, 5))
        df = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)])
        for j in range(3):
            df[f"lab{j}"] = y[:, j]
        df.to_csv(tmp_path / "mine" / f"{split}.csv", index=False)
    p = yaml.safe_load(_params(tmp_path).read_text())
    p["multilabel"]["datasets"] = ["mine"]
    p["multilabel"]["custom"] = {"mine": {"format": "csv", "train": "mine/train.csv", "test": "mine/test.csv",
                                          "label_columns": ["lab0", "lab1", "lab2"], "rows": [80, 40]}}
    p["multilabel"]["seeds"] = [0, 1]
    p["multilabel"]["train"]["workers"] = 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    (tmp_path / "reports/tuned/multilabel").mkdir(parents=True)
    (tmp_path / "reports/tuned/multilabel/logreg.json").write_text('{"params": {}}')
    r = _run([*stage_cmd("build_multilabel@mine"), "--params", "params.yaml"], tmp_path)
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "data/multilabel/mine/meta.json").read_text())
    assert meta["train"]["n"] + meta["val"]["n"] == 80 and meta["n_features"] == 5 and meta["labels"] == ["lab0", "lab1", "lab2"]
    r = _run([*stage_cmd("train_multilabel", dataset="mine", loss="logreg"),
              "--params", "params.yaml"], tmp_path)
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "reports/metrics/multilabel/mine_logreg.json").read_text())
    assert m["n_seeds"] == 2 and m["map"] > 0.7 and m["n_test"] == 40
    bad = dict(p)
    bad["multilabel"]["custom"]["mine"]["rows"] = [81, 40]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(bad))
    r = _run([*stage_cmd("build_multilabel@mine"), "--params", "params.yaml"], tmp_path)
    assert r.returncode == 2 and "expected 81" in r.stderr


def test_bad_params_and_missing_inputs_give_clear_errors(tmp_path, stage_cmd):
    params = _params(tmp_path)
    bad = yaml.safe_load(params.read_text())
    bad["multilabel"]["variants"]["simdis"]["kwargs"] = {"no_such_kw": 1}  # the table's key, again
    params.write_text(yaml.safe_dump(bad))
    r = _run([*stage_cmd("train_multilabel", dataset="yeast", loss="simdis"),
              "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "multilabel.variants.simdis.kwargs: set in both params.yaml" in r.stderr
    params = _params(tmp_path)
    r = _run([*stage_cmd("train_multilabel", dataset="yeast", loss="bce"),
              "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "build_multilabel@yeast" in r.stderr
    bad = yaml.safe_load(params.read_text())
    bad["multilabel"]["datasets"] = ["yeast", "imagenet"]
    params.write_text(yaml.safe_dump(bad))
    r = _run([*stage_cmd("build_multilabel@yeast"), "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "unknown data set" in r.stderr and "imagenet" in r.stderr


def test_missing_data_file_is_named(tmp_path, stage_cmd):
    params = _params(tmp_path)
    doc = yaml.safe_load(params.read_text())
    doc["multilabel"]["vendor_root"] = str(tmp_path / "none")
    params.write_text(yaml.safe_dump(doc))
    r = _run([*stage_cmd("build_multilabel@yeast"), "--params", str(params)], tmp_path)
    assert r.returncode == 2 and "yeast-train.arff" in r.stderr


def test_tuned_final_without_tuned_dir_is_refused(tmp_path):
    from contrastlab.params import load_params
    from contrastlab.training.multilabel_final import FinalPaths, run_final

    params = _params(tmp_path)
    ml = load_params(params).multilabel
    paths = FinalPaths(str(params), str(tmp_path / "data"), None, str(tmp_path / "m"), str(tmp_path / "p"))
    with pytest.raises(ValueError, match="tuned_dir"):
        run_final(ml, "yeast", "bce", paths)
    assert not (tmp_path / "m").exists()  # nothing written
