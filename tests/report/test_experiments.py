"""Experiment grids and MLflow tags: a queued DVC sweep in a throw-away repository.

- ``dvc exp run --queue -S 'graph.temperature=0.1,0.2,0.3'`` queues a grid of 3 experiments,
  ``dvc exp run --run-all -j 1`` runs them (each in a temporary copy of the repository),
  ``dvc exp show --json`` lists the 3 with their metrics.
- The queued stage sees ``DVC_EXP_NAME`` (the experiment's name), ``DVC_EXP_BASELINE_REV`` and
  ``DVC_ROOT`` (the real repository, although it runs in a temporary copy): the variables
  :func:`contrastlab.tracking.stage_run` turns into the MLflow tags ``dvc_exp_name`` /
  ``dvc_exp_baseline`` and uses for the default store ``<DVC_ROOT>/mlflow.db``; the two
  tests below check that side (kept apart so the sweep's stage needs neither torch nor MLflow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import _dvc as dvc_adapter  # stages/_dvc.py (stages/ is on pytest's pythonpath)

from contrastlab.invocation import Invocation, using
from contrastlab.params import params_hash
from contrastlab.tracking import stage_run, tracking_uri

TRAIN = '''\
"""Tiny stand-in for a training stage: reads graph.temperature, writes a metrics JSON."""
import json, os, time
import yaml

t0 = time.perf_counter()
p = yaml.safe_load(open("params.yaml"))["graph"]
acc = round(1.0 - abs(p["temperature"] - 0.2), 6)
seen = {k: os.environ.get(k) for k in ("DVC_EXP_NAME", "DVC_EXP_BASELINE_REV", "DVC_ROOT")}
with open(os.environ["SWEEP_ENV_LOG"], "a") as f:  # outside the repository
    f.write(json.dumps({"cwd": os.getcwd(), "temperature": p["temperature"], **seen}) + "\\n")
os.makedirs("reports", exist_ok=True)
json.dump({"acc": acc, "time_s": time.perf_counter() - t0}, open("reports/graph.json", "w"))
'''

DVC_YAML = f'''\
stages:
  train_graph:
    cmd: {sys.executable} train.py
    deps: [train.py]
    params: [graph.temperature]
    metrics:
      - reports/graph.json:
          cache: false
'''


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(args)} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def _dvc() -> str:
    exe = Path(sys.executable).with_name("dvc")
    return str(exe) if exe.exists() else "dvc"


@pytest.mark.slow
def test_queued_temperature_sweep_runs_and_is_listed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    log = tmp_path / "env.jsonl"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "DVC_", "GIT_"))}
    env.update(DVC_NO_ANALYTICS="1", SWEEP_ENV_LOG=str(log),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    dvc = _dvc()
    _run(["git", "init", "-q"], repo, env)
    _run(["git", "config", "user.email", "test@example.com"], repo, env)
    _run(["git", "config", "user.name", "test"], repo, env)
    _run([dvc, "init", "-q"], repo, env)
    (repo / "params.yaml").write_text("graph:\n  temperature: 0.5\n")
    (repo / "train.py").write_text(TRAIN)
    (repo / "dvc.yaml").write_text(DVC_YAML)
    _run(["git", "add", "-A"], repo, env)
    _run(["git", "commit", "-qm", "tiny pipeline"], repo, env)
    baseline = _run(["git", "rev-parse", "HEAD"], repo, env).strip()

    out = _run([dvc, "exp", "run", "--queue", "-S", "graph.temperature=0.1,0.2,0.3"], repo, env)
    assert out.count("Queued experiment") == 3, out
    _run([dvc, "exp", "run", "--run-all", "-j", "1"], repo, env)
    rows = json.loads(_run([dvc, "exp", "show", "--json"], repo, env))

    exps = {}
    for base in rows:
        for exp in base.get("experiments") or []:
            rev = exp["revs"][0]
            data = rev["data"]
            t = data["params"]["params.yaml"]["data"]["graph"]["temperature"]
            exps[rev["name"]] = (t, data["metrics"]["reports/graph.json"]["data"])
    assert sorted(t for t, _ in exps.values()) == [0.1, 0.2, 0.3]
    for t, m in exps.values():
        assert m["acc"] == pytest.approx(1.0 - abs(t - 0.2))
        assert m["time_s"] >= 0
    csv = _run([dvc, "exp", "show", "--csv", "--drop", ".*time_s"], repo, env)
    assert "time_s" not in csv and all(name in csv for name in exps)

    # What the queued stages saw: their experiment's name, the baseline, the real root.
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(seen) == 3
    assert {(s["DVC_EXP_NAME"], s["temperature"]) for s in seen} == \
        {(name, t) for name, (t, _) in exps.items()}
    for s in seen:
        assert s["DVC_EXP_BASELINE_REV"] == baseline
        assert Path(s["DVC_ROOT"]).resolve() == repo.resolve()
        assert Path(s["cwd"]).resolve() != repo.resolve()  # ran in a temporary copy


@pytest.mark.slow
def test_stage_run_tags_dvc_experiment(tmp_path, monkeypatch):
    """Under the variables DVC 3 sets for ``dvc exp run`` (dvc/repo/experiments/queue/base.py),
    the run carries the experiment name, baseline and params hash as tags."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CONTRASTLAB_MLFLOW", "1")
    monkeypatch.delenv("RANK", raising=False)
    env = {"DVC_EXP_NAME": "tangy-rail", "DVC_EXP_BASELINE_REV": "0" * 40, "DVC_ROOT": "/r"}
    inv = dvc_adapter.invocation(env)  # what a stage script hands the library
    assert inv == Invocation("tangy-rail", "0" * 40, Path("/r"))
    assert dvc_adapter.invocation({}) == Invocation()
    params = {"temperature": 0.2, "loss": "ntxent"}
    with using(Invocation("tangy-rail", "0" * 40)), stage_run(
            "graph", "train_graph@ntxent", params) as t:
        run_id = t.run_id
    with stage_run("graph", "train_graph@mixco", params):  # outside any DVC experiment
        pass
    client = MlflowClient(uri)
    tags = client.get_run(run_id).data.tags
    assert tags["dvc_exp_name"] == "tangy-rail"
    assert tags["dvc_exp_baseline"] == "0" * 40
    assert tags["params_hash"] == params_hash(params)
    assert tags["dvc_stage"] == "train_graph@ntxent"
    # The filter docs/report.md gives for the UI's search box selects exactly that run.
    exp_id = client.get_experiment_by_name("contrastlab-graph").experiment_id
    hits = client.search_runs([exp_id], "tags.dvc_exp_name = 'tangy-rail'")
    assert [h.info.run_id for h in hits] == [run_id]


def test_default_store_follows_dvc_root(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with using(dvc_adapter.invocation({"DVC_ROOT": str(tmp_path)})):
        assert tracking_uri(tmp_path / ".dvc" / "tmp" / "exps" / "x") == \
            f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"
    assert tracking_uri(tmp_path / "x") == f"sqlite:///{(tmp_path / 'x' / 'mlflow.db').resolve()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///elsewhere.db")
    assert tracking_uri(tmp_path) == "sqlite:///elsewhere.db"
