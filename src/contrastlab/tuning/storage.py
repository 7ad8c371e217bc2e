"""Where studies live: a journal file or an RDB (with trial heartbeats and retries of stale
trials), opening a study, the protocol attributes stored with it and the trials that count
against the budget (protocol and "Workers can die": :mod:`contrastlab.tuning`)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
import warnings
import zlib
from pathlib import Path
from typing import Any

__all__ = ["HEARTBEAT_S", "GRACE_S", "MAX_RETRY", "rdb_url"]


#: Heartbeat of a trial in an RDB study (s), silence after which it is failed and re-queued
#: (s), and how often one configuration is re-queued (module docstring, "Workers can die").
HEARTBEAT_S, GRACE_S, MAX_RETRY = 20, 60, 3


def _storage(out_dir: Path, storage: str | None, heartbeat: tuple[int, int] | None = None):
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if storage:
        return _rdb(storage, heartbeat=heartbeat or (HEARTBEAT_S, GRACE_S))
    out_dir.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(out_dir / "journal.log")))


_RDB: dict[str, Any] = {}


def rdb_url(url: str) -> str:
    """``url`` with an explicit PostgreSQL driver: SQLAlchemy 2.1 maps a bare
    ``postgresql://`` to psycopg 3, while this project pins psycopg2 (``psycopg2-binary``),
    so ``postgresql://...`` becomes ``postgresql+psycopg2://...`` unless psycopg 3 is
    installed. Other URLs are returned unchanged."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None:
            return "postgresql+psycopg2://" + url.split("://", 1)[1]
    return url


def _rdb(url: str, attempts: int = 8, heartbeat: tuple[int, int] = (HEARTBEAT_S, GRACE_S)):
    """An Optuna ``RDBStorage`` on ``url`` (one per URL, heartbeat and process) with a
    heartbeat of ``heartbeat = (interval s, grace period s)`` and a retry of stale trials
    (``RetryFailedTrialCallback(max_retry=MAX_RETRY)``). Workers started at once on an empty
    database race on Optuna's schema creation (PostgreSQL: a duplicate ``CREATE TYPE``, a
    unique-key violation); the loser retries, then finds the schema."""
    import optuna
    import sqlalchemy.exc
    from optuna.storages import RetryFailedTrialCallback

    url = rdb_url(url)
    key = f"{url}|{heartbeat[0]}|{heartbeat[1]}"
    if key in _RDB:
        return _RDB[key]
    for i in range(attempts):
        try:
            with warnings.catch_warnings():  # heartbeat_interval is "experimental" in Optuna
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                _RDB[key] = optuna.storages.RDBStorage(
                    url, heartbeat_interval=int(heartbeat[0]), grace_period=int(heartbeat[1]),
                    heartbeat_stale_trial_callback=RetryFailedTrialCallback(max_retry=MAX_RETRY))
            return _RDB[key]
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError,
                sqlalchemy.exc.InternalError):
            if i == attempts - 1:
                raise
            time.sleep(0.25 * (i + 1))
    raise AssertionError("unreachable")


def _open(name: str, *, out_dir: Path, storage: str | None, seed: int, startup: int,
          direction: str, n_done: int = 0, pruner=None, create: bool = True,
          heartbeat: tuple[int, int] | None = None):
    """Load study ``name`` (or create it when ``create``); returns the study. With
    ``create=True`` the attribute ``_created_here`` of the returned study says whether this
    call created it (the database's unique name decides between racing processes)."""
    import optuna
    from optuna.exceptions import DuplicatedStudyError

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # The sampler's seed moves with the number of trials already told so a resumed study
    # does not redraw the configurations of its first trials. Workers sharing a study in an
    # RDB would otherwise hold identically seeded samplers and draw the same configurations
    # (tests/protocol/test_postgres.py): there each process also mixes in its host and pid
    # (a shared study's order depends on the workers' interleaving anyway).
    if storage is not None:
        seed = seed ^ zlib.crc32(f"{socket.gethostname()}:{os.getpid()}".encode())
    sampler = optuna.samplers.TPESampler(seed=(seed + n_done) % 2**32, n_startup_trials=startup)
    store = optuna.storages.get_storage(_storage(out_dir, storage, heartbeat))
    try:
        store.get_study_id_from_name(name)
    except KeyError:
        if not create:
            raise
        try:
            study = optuna.create_study(storage=store, study_name=name, direction=direction,
                                        load_if_exists=False, sampler=sampler, pruner=pruner)
            study._created_here = True
            return study
        except DuplicatedStudyError:
            pass  # another worker created it a moment ago
    # an existing study is loaded, not "created if missing": a journal's create_study
    # appends a log line even when the study exists, so a rerun would change the file
    study = optuna.load_study(study_name=name, storage=store, sampler=sampler, pruner=pruner)
    study._created_here = False
    return study


_PROTOCOL_ATTRS = ("sampler_seed", "default", "pruner")


def _budget_trials(study, running: bool = False):
    """Trials that count against the budget: finished (COMPLETE, PRUNED, FAIL; with
    ``running``, RUNNING too), except interrupted, surplus and failed-and-retried (stale
    heartbeat) ones."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    # failed for a stopped heartbeat and re-queued: in a later trial's ``retry_history``
    # (set by ``RetryFailedTrialCallback``)
    retried = {n for t in trials for n in t.system_attrs.get("retry_history", ())}
    states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL,
              *((TrialState.RUNNING,) if running else ()))
    return [t for t in trials if t.state in states
            and not (t.user_attrs.get("interrupted") or t.user_attrs.get("surplus"))
            and t.number not in retried]


def _set_up(study, default, proto: dict) -> None:
    """Enqueue the default (trial 0) and THEN store the protocol attributes: a worker that
    finds the attributes knows the default is already in the study, so two workers starting
    at once never enqueue it twice."""
    if default and not study.get_trials(deepcopy=False):
        study.enqueue_trial(default, skip_if_exists=True)
    for k in _PROTOCOL_ATTRS:
        study.set_user_attr(k, proto[k])


def _wait_for_set_up(study, timeout_s: float = 30.0, poll_s: float = 0.2) -> dict:
    """The study's user attributes once its creator has stored the protocol attributes, or
    what is there after ``timeout_s`` (the creator died: the caller sets the study up)."""
    deadline = time.monotonic() + timeout_s
    attrs = study.user_attrs
    while not all(k in attrs for k in _PROTOCOL_ATTRS) and time.monotonic() < deadline:
        time.sleep(poll_s)
        attrs = study.user_attrs
    return attrs


def _fail_stale(study) -> None:
    """Fail the RUNNING trials whose heartbeat stopped and re-queue them (the storage's
    ``RetryFailedTrialCallback``); Optuna marks the function experimental."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def _first_beat(trial, study, storage: str | None) -> None:
    """Record ``trial``'s first heartbeat now, on an RDB (nothing for a journal file). Optuna
    fails a stale RUNNING trial only once it has a heartbeat, and its heartbeat thread beats
    asynchronously: a worker killed before that thread's first beat would leave a RUNNING
    trial that no worker ever fails, and the others would wait for it forever."""
    if storage is not None:
        study._storage.record_heartbeat(trial._trial_id)


def _heartbeat_of(trial, study, storage: str | None):
    """A context that beats ``trial``'s heartbeat while the objective runs (RDB studies; the
    thread Optuna's own ``study.optimize`` starts), a no-op for a journal file."""
    if storage is None:
        return contextlib.nullcontext()
    from optuna.storages._heartbeat import get_heartbeat_thread

    return get_heartbeat_thread(trial._trial_id, study._storage)
