"""MLflow variant runs: one run per (track, variant) shared by the training and evaluation
stages, nested seed runs, artifacts / models / datasets, FAILED on death, a store created
once under a lock when stages start at once, and tracking failures that never fail a stage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _stagerun import run_stage_here

from contrastlab.invocation import Invocation, using

from contrastlab.tracking import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, variant_run

pytestmark = pytest.mark.slow
SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CONTRASTLAB_MLFLOW", "1")
    monkeypatch.delenv("RANK", raising=False)
    # as stages/_dvc.py sets it under dvc exp run; the artifacts under tmp_path, not the checkout
    with using(Invocation(experiment="tangy-rail", store_root=tmp_path)):
        yield uri


def _runs(uri: str, track: str = "graph"):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(f"contrastlab-{track}")
    return c, exp, c.search_runs([exp.experiment_id])


def test_train_and_evaluate_share_one_variant_run(store, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ckpt = tmp_path / "ntxent.pt"
    ckpt.write_bytes(b"\0" * 64)
    params = {"loss": "ntxent", "temperature": 0.4}
    with variant_run("graph", "ntxent", params, stage="train_graph@ntxent") as t:
        for seed in (0, 1):
            with t.seed_run(seed) as s:
                for ep in range(3):
                    s.log_metrics({"loss": 1.0 / (ep + 1 + seed)}, step=ep)
        t.log_model(ckpt, params=params)
        t.log_dataset("cora", "0123abcd", str(tmp_path))
        fig, ax = plt.subplots()
        ax.plot([0, 1])
        t.log_figure(fig, "loss.png")
        plt.close(fig)
        train_id = t.run_id
    with variant_run("graph", "ntxent", params, stage="evaluate_graph@ntxent") as t:
        assert t.run_id == train_id
        t.log_params({"c_grid": [0.1, 1.0]}, prefix="probe")
        t.log_metrics({"logreg_acc_mean": 0.81, "rank@10": 0.5})
    with variant_run("graph", "mixco", {"loss": "mixco", "temperature": 0.2},
                     stage="train_graph@mixco"):
        pass

    c, exp, runs = _runs(store)
    assert exp.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    # every track's experiment exists, even those whose stages have not run
    for track in ("code", "multilabel", "report"):
        other = c.get_experiment_by_name(f"contrastlab-{track}")
        assert other is not None and other.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    by_name = {r.info.run_name: r for r in runs}
    assert len(by_name) == len(runs)  # names unique
    run = by_name["ntxent · tangy-rail"]
    assert run.info.run_id == train_id and run.info.status == "FINISHED"
    # the variant's params next to its evaluation metric, in one run
    assert run.data.params["temperature"] == "0.4" and run.data.params["loss"] == "ntxent"
    assert run.data.params["probe.c_grid"] == "[0.1, 1.0]"
    assert run.data.metrics == {"logreg_acc_mean": 0.81, "rank_at_10": 0.5}
    assert run.data.tags["contrastlab.stages"] == "train_graph@ntxent,evaluate_graph@ntxent"
    # per-seed curves in nested child runs; the DVC experiment is the parent of the variants
    for seed in (0, 1):
        child = by_name[f"ntxent · tangy-rail · seed {seed}"]
        assert child.data.tags["mlflow.parentRunId"] == train_id
        assert [m.step for m in c.get_metric_history(child.info.run_id, "loss")] == [0, 1, 2]
    parent = by_name["tangy-rail"]
    assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert by_name["mixco · tangy-rail"].data.tags["mlflow.parentRunId"] == parent.info.run_id
    # artifacts, model, dataset
    assert [f.path for f in c.list_artifacts(train_id, "figures")] == ["figures/loss.png"]
    (out,) = run.outputs.model_outputs
    model = c.get_logged_model(out.model_id)
    assert model.source_run_id == train_id and model.params["temperature"] == "0.4"
    (ds,) = run.inputs.dataset_inputs
    assert (ds.dataset.name, ds.dataset.digest) == ("cora", "0123abcd")


def test_rerun_of_a_stage_opens_a_new_run(store):
    params = {"loss": "ntxent", "temperature": 0.4}
    ids = []
    for _ in range(2):
        with variant_run("graph", "ntxent", params, stage="evaluate_graph@ntxent") as t:
            ids.append(t.run_id)
    assert ids[0] != ids[1]
    _, _, runs = _runs(store)
    names = sorted(r.info.run_name for r in runs if r.data.tags.get("variant") == "ntxent")
    assert names == ["ntxent · tangy-rail", "ntxent · tangy-rail #2"]


def test_exception_marks_run_failed(store):
    with pytest.raises(RuntimeError):
        with variant_run("graph", "ntxent", {"t": 1}, stage="train_graph@ntxent") as t:
            with t.seed_run(0) as s:
                seed_id = s.run_id
                raise RuntimeError("NaN loss")
    _, _, runs = _runs(store)
    assert {r.info.status for r in runs if r.data.tags.get("contrastlab.role") != "invocation"} \
        == {"FAILED"}
    assert any(r.info.run_id == seed_id for r in runs)


def test_tracking_failure_is_a_warning_not_a_failed_stage(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{blocker / 'mlflow.db'}")
    monkeypatch.setenv("CONTRASTLAB_MLFLOW", "1")
    monkeypatch.delenv("RANK", raising=False)
    ran = []
    with caplog.at_level("WARNING", logger="contrastlab.tracking"):
        with variant_run("graph", "ntxent", {"t": 1}, stage="train_graph@ntxent") as t:
            t.log_metrics({"loss": 1.0})
            with t.seed_run(0) as s:
                s.log_metrics({"loss": 1.0})
            ran.append(t.active)
    assert ran == [False]
    assert "MLflow tracking unavailable" in caplog.text


CHILD = textwrap.dedent('''\
    import sys, time
    from contrastlab.tracking import variant_run
    with variant_run("graph", sys.argv[1], {"temperature": float(sys.argv[2])},
                     stage="train_graph@" + sys.argv[1]) as t:
        t.log_metrics({"probe_acc": float(sys.argv[2])})
        print(t.run_id, flush=True)
        time.sleep(float(sys.argv[3]))
    ''')


def _env(tmp_path: Path, uri: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env.update(MLFLOW_TRACKING_URI=uri, CONTRASTLAB_MLFLOW="1", PYTHONPATH=SRC,
               OMP_NUM_THREADS="1")
    env.pop("RANK", None)
    (tmp_path / "child.py").write_text(CHILD)
    return env


def test_three_stages_started_at_once_on_a_missing_store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    (tmp_path / "fresh").mkdir()
    env = _env(tmp_path, uri)
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "child.py"), f"v{i}", str(i / 10),
                               "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path) for i in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "tracking unavailable" not in err and "disabled" not in err, err
    _, _, runs = _runs(uri)
    got = {r.data.tags["variant"]: (r.info.status, r.data.metrics.get("probe_acc"))
           for r in runs}
    assert got == {f"v{i}": ("FINISHED", i / 10) for i in range(3)}


def test_killed_stage_leaves_a_failed_run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = _env(tmp_path, uri)
    ids = {}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        p = subprocess.Popen([sys.executable, str(tmp_path / "child.py"), sig.name, "0.1", "120"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path)
        ids[sig] = p.stdout.readline().strip()
        assert ids[sig], p.stderr.read()
        p.send_signal(sig)
        p.wait(timeout=60)
        assert p.returncode == -sig  # the signal's usual exit status is kept
    c, _, _ = _runs(uri)
    assert c.get_run(ids[signal.SIGTERM]).info.status == "FAILED"
    assert c.get_run(ids[signal.SIGKILL]).info.status == "RUNNING"  # nobody could mark it
    # the next run on this host finds the dead process's run and marks it FAILED
    subprocess.run([sys.executable, str(tmp_path / "child.py"), "next", "0.2", "0"], env=env,
                   check=True, capture_output=True, cwd=tmp_path, timeout=300)
    assert c.get_run(ids[signal.SIGKILL]).info.status == "FAILED"


# ------------------------------------------------------------------ multi-label stage
def _tiny_multilabel(tmp: Path) -> None:
    """A 3-label CSV data set ``mine`` (80 train / 40 test rows), tiny training settings,
    tuned choices for ``logreg`` (none) and ``mulsupcon`` (temperature), the data set built."""
    import numpy as np
    import pandas as pd
    import yaml

    rng = np.random.default_rng(0)
    (tmp / "mine").mkdir()
    w = rng.normal(size=(3, 5))
    for split, n in (("train", 80), ("test", 40)):
        y = (rng.random((n, 3)) < 0.4).astype(int)
        y[y.sum(1) == 0, 0] = 1
        df = pd.DataFrame(y @ w + 0.3 * rng.normal(size=(n, 5)), columns=[f"f{i}" for i in range(5)])
        for j in range(3):
            df[f"lab{j}"] = y[:, j]
        df.to_csv(tmp / "mine" / f"{split}.csv", index=False)
    p = {"multilabel": {
        "datasets": ["mine"], "losses": ["logreg", "mulsupcon"], "seeds": [0, 1],
        "vendor_root": str(tmp / "none"), "optional_root": str(tmp / "none"),
        "custom": {"mine": {"format": "csv", "train": "mine/train.csv", "test": "mine/test.csv",
                            "label_columns": ["lab0", "lab1", "lab2"], "rows": [80, 40]}},
        "train": {"hidden": [8], "enc_dim": 8, "proj_dim": 4, "batch_size": 32, "max_steps": 20,
                  "eval_every": 10, "workers": 2},
        "tune": {"trials": 2, "startup_trials": 1, "datasets": ["mine"]},
    }}
    (tmp / "params.yaml").write_text(yaml.safe_dump(p))
    tuned = tmp / "reports/tuned/multilabel"
    tuned.mkdir(parents=True)
    (tuned / "logreg.json").write_text('{"params": {}}')
    (tuned / "mulsupcon.json").write_text('{"params": {"temperature": 0.25}}')
    r = run_stage_here(Path(SRC).parent / "stages" / "build_multilabel.py",
                       ["--dataset", "mine", "--out", "data/multilabel/mine",
                        "--report-dir", "reports/data/multilabel"], tmp, _NO_TRACKING)
    assert r.returncode == 0, r.stderr


#: the untracked runs: no MLflow, no DVC experiment (as outside ``dvc exp run``)
_NO_TRACKING = {"CONTRASTLAB_MLFLOW": "0", "MLFLOW_TRACKING_URI": None, "DVC_EXP_NAME": None,
                "DVC_EXP_BASELINE_REV": None, "DVC_ROOT": None}


def _train_multilabel(tmp: Path, variant: str, mlflow_env: dict[str, str] | None) -> None:
    """The stage in this process, tracked with ``mlflow_env`` (as ``dvc exp run`` sets it) or
    (``None``) untracked."""
    argv = ["--dataset", "mine", "--loss", variant, "--data-dir", "data/multilabel",
            "--tuned-dir", "reports/tuned/multilabel", "--metrics-dir", "reports/metrics/multilabel",
            "--plots-dir", "reports/plots/multilabel"]
    script = Path(SRC).parent / "stages" / "train_multilabel.py"
    p = run_stage_here(script, argv, tmp, {**_NO_TRACKING, "RANK": None, **(mlflow_env or {})})
    assert p.returncode == 0, p.stderr
    assert "tracking unavailable" not in p.stderr and "disabled" not in p.stderr, p.stderr


def test_multilabel_stage_logs_one_run_per_dataset_variant(tmp_path):
    """train_multilabel: params and test metrics on one run per (data set, variant), a nested
    run per seed with its curve, unique names, dataset input, artifacts; DVC outputs the same
    bytes with and without tracking."""
    _tiny_multilabel(tmp_path)
    outs = ["reports/metrics/multilabel/mine_{v}.json", "reports/plots/multilabel/mine_{v}.csv",
            "reports/metrics/multilabel/reps/mine_{v}.npz"]
    untracked = {}
    for v in ("logreg", "mulsupcon"):  # untracked, in this process
        _train_multilabel(tmp_path, v, None)
        untracked.update({o.format(v=v): (tmp_path / o.format(v=v)).read_bytes() for o in outs})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracked = {"CONTRASTLAB_MLFLOW": "1", "MLFLOW_TRACKING_URI": uri, "DVC_EXP_NAME": "tiny-ml"}
    for v in ("logreg", "mulsupcon"):
        _train_multilabel(tmp_path, v, tracked)
    assert {k: (tmp_path / k).read_bytes() for k in untracked} == untracked  # byte-identical

    c, _, runs = _runs(uri, "multilabel")
    by_name = {r.info.run_name: r for r in runs}
    assert len(by_name) == len(runs)  # names unique
    assert set(by_name) == {"tiny-ml", "mine-logreg · tiny-ml", "mine-mulsupcon · tiny-ml",
                            *(f"mine-{v} · tiny-ml · seed {s}" for v in ("logreg", "mulsupcon")
                              for s in (0, 1))}
    run = by_name["mine-mulsupcon · tiny-ml"]
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.parentRunId"] == by_name["tiny-ml"].info.run_id
    # the variant's loss, temperature and tuned choice next to its test metrics
    p, m = run.data.params, run.data.metrics
    assert (p["loss"], p["temperature"], p["tuned.temperature"], p["baseline"]) == \
        ("mulsupcon", "0.25", "0.25", "False")
    assert (p["dataset"], p["variant"], p["seeds"]) == ("mine", "mulsupcon", "[0, 1]")
    saved = json.loads((tmp_path / "reports/metrics/multilabel/mine_mulsupcon.json").read_text())
    for k in ("map", "micro_f1", "macro_f1", "macro_f1_val_t", "map_std"):
        assert m[k] == pytest.approx(saved[k])
    assert not any("_seed" in k for k in m) and m["time_s"] > 0
    base = by_name["mine-logreg · tiny-ml"].data
    assert (base.params["loss"], base.params["baseline"]) == ("logreg", "True")
    assert "map" in base.metrics
    # one nested run per seed with its curve (step = training step) and its test metrics
    for s in (0, 1):
        child = by_name[f"mine-mulsupcon · tiny-ml · seed {s}"]
        assert child.data.tags["mlflow.parentRunId"] == run.info.run_id
        assert [h.step for h in c.get_metric_history(child.info.run_id, "loss")] == [10, 20]
        assert child.data.metrics["map"] == pytest.approx(saved[f"map_seed{s}"])
        assert child.data.metrics["val_map_final"] == pytest.approx(saved[f"val_map_seed{s}"])
    lr_child = by_name["mine-logreg · tiny-ml · seed 0"]
    # one validation score per C of the logreg_c grid (8 decades 1e-4..1e3, more when extended)
    assert len(c.get_metric_history(lr_child.info.run_id, "val_map")) >= 8
    # data set input and artifacts
    (ds,) = run.inputs.dataset_inputs
    assert ds.dataset.name == "mine" and len(ds.dataset.digest) == 16
    arts = {f.path for d in ("history", "metrics", "figures")
            for f in c.list_artifacts(run.info.run_id, d)}
    assert arts == {"history/mine_mulsupcon.csv", "metrics/mine_mulsupcon.json",
                    "metrics/mine_mulsupcon.npz", "figures/curves.png"}
