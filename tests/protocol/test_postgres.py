"""Scale-out on a real PostgreSQL server (fixture ``pg_server``, tests/protocol/conftest.py):
one Optuna study shared by concurrent worker processes through ``run_study(storage=url)``,
and an MLflow tracking server on PostgreSQL written to by concurrent tracked stages."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

SCORES = {"a": 0.1, "b": 0.5, "c": 0.3, "d": 0.9, "e": 0.2, "f": 0.4}

# One worker: waits at a barrier until every worker has imported everything, then runs
# the study; prints the trial numbers it evaluated as JSON on its last line.
WORKER = r"""
import json, os, sys, time
from pathlib import Path
from contrastlab.tuning import SearchDim, run_study
a = json.loads(sys.argv[1])
Path(a["barrier"], str(os.getpid())).touch()
t0 = time.time()
while len(list(Path(a["barrier"]).iterdir())) < a["n_workers"] and time.time() - t0 < 60:
    time.sleep(0.05)
ran = []
def objective(ch):
    ran.append(ch["c"])
    time.sleep(a["sleep"])
    return a["scores"][ch["c"]]
space = {k: SearchDim(**v) for k, v in a["space"].items()}
r = run_study(track="t", variant=a["variant"], space=space, objective=objective,
              n_trials=a["n_trials"], seed=0, out_dir=a["out_dir"], storage=a["storage"],
              default=a["default"], progress=False)
print(json.dumps({"ran": ran, "best": r.best_params}))
"""


def _space():
    from contrastlab.tuning import SearchDim

    return {"c": SearchDim(type="categorical", choices=list(SCORES))}


def _workers(n: int, tmp: Path, **kw) -> list[dict]:
    barrier = tmp / f"barrier-{kw['variant']}"
    barrier.mkdir()
    args = json.dumps({"barrier": str(barrier), "n_workers": n, "sleep": 0.3,
                       "scores": SCORES, "space": {k: v.model_dump() for k, v in _space().items()},
                       "out_dir": str(tmp / "unused"), **kw})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CONTRASTLAB_MLFLOW": "0"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def _enqueue_all(storage, name: str) -> None:
    import optuna

    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    for c in SCORES:
        study.enqueue_trial({"c": c})


@pytest.mark.slow
def test_two_workers_share_one_study_on_postgres(pg_server, tmp_path):
    """Two processes run one 6-trial study concurrently on PostgreSQL.

    The six configurations of a 6-point categorical space are enqueued before the workers
    start (as a coordinator would), so the set of evaluated configurations does not depend
    on how the workers interleave (a TPE draw would depend on which trials had finished when
    it was made); the test then checks what the storage must guarantee: every waiting trial
    is taken by exactly one worker, the budget stops both workers at exactly 6 finished
    trials, the default (``a``, already queued) is not enqueued a second time, and the
    chosen configuration equals that of the same study in a local journal file."""
    import optuna
    from optuna.trial import TrialState

    from contrastlab.tuning import study_history, study_name

    url = pg_server.createdb("optuna_a")
    name = study_name("t", "grid", _space())
    _enqueue_all(url, name)
    outs = _workers(2, tmp_path, variant="grid", n_trials=6, storage=url, default={"c": "a"})
    ran = [c for o in outs for c in o["ran"]]
    assert sorted(ran) == sorted(SCORES)  # each configuration evaluated once, by one worker
    assert all(o["ran"] for o in outs)  # both workers took part
    trials = optuna.load_study(study_name=name, storage=url).get_trials()
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 6 and len({t.number for t in complete}) == 6
    # no duplicate default; a trial asked for by a worker that lost the race for the last
    # slot is recorded as surplus (FAIL) and never evaluated
    kept = [t for t in trials if not t.user_attrs.get("surplus")]
    assert len(kept) == 6
    assert all(t.state == TrialState.FAIL for t in trials if t.user_attrs.get("surplus"))

    # the same study in a journal file, one process
    from contrastlab.tuning import _storage, run_study

    journal_dir = tmp_path / "journal"
    _enqueue_all(_storage(journal_dir, None), name)
    r = run_study(track="t", variant="grid", space=_space(), objective=lambda ch: SCORES[ch["c"]],
                  n_trials=6, seed=0, out_dir=journal_dir, default={"c": "a"}, progress=False)
    assert outs[0]["best"] == outs[1]["best"] == r.best_params == {"c": "d"}
    h_pg = study_history(track="t", variant="grid", space=_space(), out_dir=tmp_path / "x",
                         storage=url)
    h_j = study_history(track="t", variant="grid", space=_space(), out_dir=journal_dir)
    key = ["c", "value", "state", "best_so_far"]
    assert (h_pg.sort_values("c")[key].reset_index(drop=True)
            .equals(h_j.sort_values("c")[key].reset_index(drop=True)))


def test_workers_starting_at_once_enqueue_the_default_once(pg_server, tmp_path):
    """Two processes start at once on a study that does not exist yet, both given the
    default: only the one whose ``create_study`` won enqueues it, so it is evaluated once."""
    import optuna

    from contrastlab.tuning import study_name

    url = pg_server.createdb("optuna_b")
    outs = _workers(2, tmp_path, variant="race", n_trials=4, storage=url, default={"c": "b"})
    study = optuna.load_study(study_name=study_name("t", "race", _space()), storage=url)
    params = [t.params for t in study.get_trials() if not t.user_attrs.get("surplus")]
    assert len(params) == 4 and params.count({"c": "b"}) >= 1
    waiting_default = [t for t in study.get_trials()
                       if t.system_attrs.get("fixed_params") == {"c": "b"}]
    assert len(waiting_default) == 1  # enqueued exactly once
    assert sum(len(o["ran"]) for o in outs) == 4


# A worker of a TPE study on a continuous space. It records the trials whose parameters
# Optuna's TPESampler drew from its Parzen estimators (TPESampler._sample, reached from both
# the relative and the independent path once n_startup_trials trials have finished; before
# that the sampler draws at random), and prints its evaluated values and that record as JSON
# on its last line.
TPE_WORKER = r"""
import json, os, sys, time
from pathlib import Path
import optuna
from contrastlab.tuning import SearchDim, run_study
a = json.loads(sys.argv[1])
tpe = []
orig = optuna.samplers.TPESampler._sample
def spy(self, study, trial, search_space):
    tpe.append(trial.number)
    return orig(self, study, trial, search_space)
optuna.samplers.TPESampler._sample = spy
Path(a["barrier"], str(os.getpid())).touch()
t0 = time.time()
while len(list(Path(a["barrier"]).iterdir())) < a["n_workers"] and time.time() - t0 < 60:
    time.sleep(0.05)
ran = []
def objective(ch):
    ran.append(ch["x"])
    time.sleep(a["sleep"])
    return -(ch["x"] - 0.7) ** 2
space = {"x": SearchDim(type="float", low=0.0, high=1.0)}
r = run_study(track="t", variant="tpe", space=space, objective=objective,
              n_trials=a["n_trials"], seed=0, out_dir=a["out_dir"], storage=a["storage"],
              startup_trials=a["startup"], default={"x": 0.5}, progress=False)
print(json.dumps({"ran": ran, "tpe": tpe, "best": r.best_params}))
"""


def test_two_workers_sample_from_tpe_after_the_startup_trials(pg_server, tmp_path):
    """Two processes run one 12-trial TPE study on PostgreSQL with 3 start-up trials and
    nothing pre-loaded but the default: after the start-up trials both workers draw their
    configurations from TPE on the shared history. Checks: the budget is met exactly (12
    finished trials, surplus asks recorded as FAIL and never evaluated), every trial is a
    distinct configuration evaluated by one worker, both workers sampled from TPE, and every
    trial asked once at least ``n_startup`` trials had finished was a TPE draw (trial ``k``
    is asked with at least ``k - 1`` finished trials when two workers each hold one)."""
    import optuna
    from optuna.trial import TrialState

    from contrastlab.tuning import SearchDim, study_name

    n_trials, startup, n_workers = 12, 3, 2
    url = pg_server.createdb("optuna_tpe")
    barrier = tmp_path / "barrier-tpe"
    barrier.mkdir()
    args = json.dumps({"barrier": str(barrier), "n_workers": n_workers, "sleep": 0.25,
                       "n_trials": n_trials, "startup": startup, "storage": url,
                       "out_dir": str(tmp_path / "unused")})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CONTRASTLAB_MLFLOW": "0"}
    procs = [subprocess.Popen([sys.executable, "-c", TPE_WORKER, args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(n_workers)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    name = study_name("t", "tpe", {"x": SearchDim(type="float", low=0.0, high=1.0)})
    trials = optuna.load_study(study_name=name, storage=url).get_trials()
    kept = [t for t in trials if not t.user_attrs.get("surplus")]
    complete = [t for t in kept if t.state == TrialState.COMPLETE]
    assert len(kept) == len(complete) == n_trials                # the budget, exactly
    assert all(t.state == TrialState.FAIL for t in trials if t.user_attrs.get("surplus"))
    xs = [t.params["x"] for t in complete]
    assert len(set(xs)) == n_trials                               # distinct configurations
    ran = sorted(x for o in outs for x in o["ran"])
    assert ran == sorted(xs)                                      # each evaluated once
    assert all(o["ran"] for o in outs)                            # both workers took part
    by_tpe = {k for o in outs for k in o["tpe"]}
    queued = {t.number for t in trials if t.system_attrs.get("fixed_params")}
    assert queued == {0} and 0 not in by_tpe                      # the default, enqueued
    late = {t.number for t in kept if t.number >= startup + n_workers - 1}
    assert len(late) >= n_trials - startup - n_workers + 1 and late <= by_tpe, (late, by_tpe)
    assert all(o["tpe"] for o in outs), outs                      # both workers drew from TPE
    early = {t.number for t in kept if 0 < t.number < startup}
    assert not early & by_tpe                                     # start-up trials: random


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TRACKED = r"""
import json, sys
from contrastlab.tracking import stage_run
from contrastlab.tuning import SearchDim, run_study
i, out = int(sys.argv[1]), sys.argv[2]
space = {"x": SearchDim(type="float", low=0.0, high=1.0)}
with stage_run("graph", f"tune_pg@{i}", {"i": i}) as tr:
    r = run_study(track="t", variant=f"v{i}", space=space, objective=lambda ch: ch["x"],
                  n_trials=2, seed=0, out_dir=out, tracker=tr, progress=False)
    tr.log_metrics({"best": r.best_value})
    print("RUN_ID=" + str(tr.run_id))
"""


@pytest.mark.slow
def test_mlflow_server_on_postgres_takes_concurrent_stages(pg_server, tmp_path):
    """``mlflow server`` with a PostgreSQL backend store; three processes run a tracked stage
    (contrastlab.tracking.stage_run + a 2-trial study with nested trial runs) at once."""
    from mlflow.tracking import MlflowClient

    url = pg_server.createdb("mlflow")  # postgresql+psycopg2://: SQLAlchemy 2.1's bare
    # postgresql:// means psycopg 3, which is not installed (see contrastlab.tuning.rdb_url)
    port = _free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [str(mlflow_bin), "server", "--backend-store-uri", url, "--default-artifact-root",
         str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180  # schema creation; slow on a loaded machine
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.time() > deadline:
                pytest.fail("mlflow server did not start:\n" + (tmp_path / "server.log").read_text())
            time.sleep(0.5)
        env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CONTRASTLAB_MLFLOW": "1",
               "OMP_NUM_THREADS": "1"}
        procs = [subprocess.Popen([sys.executable, "-c", TRACKED, str(i), str(tmp_path / f"s{i}")],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env) for i in range(3)]
        parents = []
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err
            parents += [ln[len("RUN_ID="):] for ln in out.splitlines() if ln.startswith("RUN_ID=")]
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("contrastlab-graph")
        runs = client.search_runs([exp.experiment_id], max_results=100)
        by_id = {r.info.run_id: r for r in runs}
        assert set(parents) <= set(by_id) and len(set(parents)) == 3
        for pid in parents:
            assert by_id[pid].info.status == "FINISHED" and "best" in by_id[pid].data.metrics
            kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == pid]
            assert len(kids) == 2
            assert all(k.info.status == "FINISHED" and "objective" in k.data.metrics
                       for k in kids)
            assert by_id[pid].data.metrics["best"] == max(k.data.metrics["objective"]
                                                          for k in kids)
    finally:
        import signal

        try:
            os.killpg(server.pid, signal.SIGTERM)
        except ProcessLookupError:  # it exited already
            pass
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_bare_postgresql_urls_get_the_pinned_driver(monkeypatch):
    """SQLAlchemy 2.1 reads ``postgresql://`` as psycopg 3, which is not installed: Optuna
    storages and the MLflow tracking URI get ``postgresql+psycopg2://`` instead."""
    import importlib.util

    from contrastlab.tracking import tracking_uri
    from contrastlab.tuning import rdb_url

    if importlib.util.find_spec("psycopg") is not None:
        pytest.skip("psycopg 3 is installed: bare postgresql:// URLs are left as they are")
    bare = "postgresql://u:p@db-host:5432/studies"
    assert rdb_url(bare) == "postgresql+psycopg2://u:p@db-host:5432/studies"
    assert rdb_url("sqlite:///x.db") == "sqlite:///x.db"
    assert rdb_url("postgresql+psycopg2://u@/d") == "postgresql+psycopg2://u@/d"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", bare)
    assert tracking_uri() == rdb_url(bare)
