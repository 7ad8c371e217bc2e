"""Issue 38: a worker of a shared study killed mid-trial (SIGKILL) on a real PostgreSQL server
(fixture ``pg_server``, tests/protocol/conftest.py): its trial's heartbeat stops, the
surviving worker fails it and re-queues its configuration (``RetryFailedTrialCallback``),
and the budget is met with distinct complete trials (contrastlab.tuning, "Workers can die")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCORES = {"a": 0.1, "b": 0.5, "c": 0.3, "d": 0.9, "e": 0.2, "f": 0.4}

# One worker; marks each trial it starts with a file <pid>-<choice>; "sleep" per trial.
WORKER = r"""
import json, os, sys, time
from pathlib import Path
from contrastlab.tuning import SearchDim, run_study
a = json.loads(sys.argv[1])
ran = []
def objective(ch):
    Path(a["marks"], "%d-%s" % (os.getpid(), ch["c"])).touch()
    time.sleep(a["sleep"])
    ran.append(ch["c"])
    return a["scores"][ch["c"]]
space = {"c": SearchDim(type="categorical", choices=sorted(a["scores"]))}
r = run_study(track="t", variant="hb", space=space, objective=objective, n_trials=a["n"],
              seed=0, out_dir=a["out"], storage=a["storage"], progress=False,
              heartbeat=(1, 2))
print(json.dumps({"ran": ran, "best": r.best_params, "n_complete": r.n_complete,
                  "n_failed": r.n_failed}))
"""


def _start(tmp: Path, url: str, sleep: float, marks: Path) -> subprocess.Popen:
    args = json.dumps({"marks": str(marks), "sleep": sleep, "scores": SCORES, "n": len(SCORES),
                       "out": str(tmp / "unused"), "storage": url})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CONTRASTLAB_MLFLOW": "0"}
    return subprocess.Popen([sys.executable, "-c", WORKER, args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_a_worker_killed_mid_trial_is_failed_requeued_and_the_budget_met(pg_server, tmp_path):
    import optuna
    from optuna.trial import TrialState

    from contrastlab.tuning import SearchDim, study_name

    url = pg_server.createdb("optuna_hb")
    space = {"c": SearchDim(type="categorical", choices=sorted(SCORES))}
    name = study_name("t", "hb", space)
    # a coordinator enqueues the six configurations, so which worker evaluates which does not
    # change the set of configurations (as in test_postgres.py)
    study = optuna.create_study(storage=url, study_name=name, direction="maximize")
    for c in SCORES:
        study.enqueue_trial({"c": c})
    marks = tmp_path / "marks"
    marks.mkdir()

    victim = _start(tmp_path, url, 120.0, marks)  # would sleep 2 minutes in its first trial
    t0 = time.time()
    while not any(marks.iterdir()) and time.time() - t0 < 90 and victim.poll() is None:
        time.sleep(0.1)
    started = [m.name for m in marks.iterdir()]
    assert len(started) == 1 and started[0].startswith(f"{victim.pid}-"), \
        (started, victim.poll() and victim.communicate())
    killed_choice = started[0].split("-", 1)[1]
    survivor = _start(tmp_path, url, 0.2, marks)
    os.kill(victim.pid, signal.SIGKILL)  # mid-trial: its trial stays RUNNING in PostgreSQL
    victim.wait()
    out, err = survivor.communicate(timeout=180)
    assert survivor.returncode == 0, err
    res = json.loads(out.strip().splitlines()[-1])

    trials = optuna.load_study(study_name=name, storage=url).get_trials()
    by_state = {s: [t for t in trials if t.state == s] for s in TrialState}
    assert not by_state[TrialState.RUNNING] and not by_state[TrialState.WAITING]
    complete = by_state[TrialState.COMPLETE]
    # the budget (6) is met with six distinct complete trials: every configuration once
    assert len(complete) == 6 and len({t.number for t in complete}) == 6
    assert sorted(t.params["c"] for t in complete) == sorted(SCORES)
    assert res["n_complete"] == 6 and res["n_failed"] == 0 and res["best"] == {"c": "d"}
    # the killed trial: FAIL by the stale heartbeat, its configuration re-run by the survivor
    failed = by_state[TrialState.FAIL]
    assert len(failed) == 1 and failed[0].params == {"c": killed_choice}
    retry = [t for t in complete if t.system_attrs.get("failed_trial") == failed[0].number]
    assert len(retry) == 1 and retry[0].params == {"c": killed_choice}
    assert sorted(res["ran"]) == sorted(SCORES)  # the survivor ran all six, the retry included


def test_a_trial_abandoned_right_after_it_was_asked_goes_stale(pg_server):
    """A worker killed between asking for a trial and its objective's first heartbeat thread
    beat: Optuna never fails a RUNNING trial without any heartbeat, so the other workers would
    wait for it forever; ``run_study`` records the first beat right after asking
    (``tuning.storage._first_beat``), so the trial goes stale and is failed."""
    import optuna
    from optuna.trial import TrialState

    from contrastlab.tuning.storage import _fail_stale, _first_beat, _rdb

    url = pg_server.createdb("optuna_first_beat")
    study = optuna.create_study(storage=_rdb(url, heartbeat=(1, 2)), study_name="first-beat",
                                direction="maximize")
    beaten, silent = study.ask(), study.ask()
    _first_beat(beaten, study, url)
    time.sleep(3.5)  # past the 2 s grace period
    _fail_stale(study)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[beaten.number] == TrialState.FAIL
    assert states[silent.number] == TrialState.RUNNING  # Optuna's rule: no beat, never stale
