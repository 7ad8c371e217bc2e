"""Run lifecycle: runs this process holds open end FINISHED or FAILED (exception, signal,
exit, or a later run on the same host finding a dead pid), and the fluent active run."""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import signal
import socket
import threading
from typing import Any, Iterator, Protocol

log = logging.getLogger(__name__)


class OpenRun(Protocol):
    """What the lifecycle needs of a run it holds open (a :class:`~.tracker.Tracker`; named
    structurally so this module, which the tracker imports, does not import it back)."""

    _client: Any
    _info: dict[str, Any]

    @property
    def run_id(self) -> str | None: ...


_OPEN: dict[str, Any] = {}  # run_id -> client, for runs this process has not closed yet
_OPEN_LOCK = threading.Lock()
_HANDLED = (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None))
_previous: dict[int, Any] = {}  # signal -> the handler it had before ours


def _fail_open_runs() -> None:
    """Mark every run this process still holds open as FAILED (best effort, never raises)."""
    with _OPEN_LOCK:
        items = list(_OPEN.items())
        _OPEN.clear()
    for run_id, client in items:
        with contextlib.suppress(Exception):  # dying process: nothing more to do
            client.set_terminated(run_id, "FAILED")


def _on_signal(signum, frame) -> None:
    _fail_open_runs()
    prev = _previous.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)  # e.g. Python's SIGINT handler raises KeyboardInterrupt
    elif prev == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # the signal's usual effect (exit status -signum)


@functools.cache  # once per process
def _install_handlers() -> None:
    """Install the SIGTERM/SIGINT/SIGHUP handlers and the atexit hook once (main thread only)."""
    atexit.register(_fail_open_runs)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _HANDLED:
        if sig is None or (prev := signal.getsignal(sig)) == signal.SIG_IGN:
            continue
        with contextlib.suppress(ValueError, OSError):  # not settable here
            _previous[sig] = prev
            signal.signal(sig, _on_signal)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fail_stale_runs(client, exp_id: str) -> None:
    """Runs of this host left RUNNING by a process that no longer exists (SIGKILL, power
    loss) are marked FAILED."""
    host = socket.gethostname()
    runs = client.search_runs([exp_id], f"attributes.status = 'RUNNING' and "
                                        f"tags.`contrastlab.host` = '{host}'", max_results=200)
    for r in runs:
        pid = r.data.tags.get("contrastlab.pid", "")
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            client.set_terminated(r.info.run_id, "FAILED")


def _tag(k: str, v: Any):
    from mlflow.entities import RunTag

    return RunTag(k, str(v))


def _process_tags() -> dict[str, str]:
    return {"contrastlab.host": socket.gethostname(), "contrastlab.pid": str(os.getpid())}


@contextlib.contextmanager
def _closing(t: OpenRun, fluent: bool = False) -> Iterator[None]:
    """Register ``t``'s run as open; end it FINISHED, or FAILED on any exception (also the
    fluent API's active run when ``fluent``)."""
    rid = t.run_id
    with _OPEN_LOCK:
        _OPEN[rid] = t._client
    status = "FAILED"
    try:
        yield
        status = "FINISHED"
    finally:
        with _OPEN_LOCK:
            _OPEN.pop(rid, None)
        if fluent:  # end the fluent active run (then set the same status by id)
            try:
                import mlflow

                mlflow.end_run(status=status)
            except Exception as e:  # noqa: BLE001
                log.debug("fluent MLflow run not ended: %s", e)
        try:
            t._client.set_terminated(rid, status)
        except Exception as e:  # noqa: BLE001
            log.warning("MLflow: could not end run %s (%s)", rid, e)


def _activate_fluent(tracker: OpenRun) -> bool:
    """Make the run the fluent API's active run (so ``mlflow.log_*`` and nested
    ``mlflow.start_run(nested=True)`` calls inside the block attach to it), when none is."""
    try:
        import mlflow

        if mlflow.active_run() is not None:
            return False
        mlflow.set_tracking_uri(tracker._info["uri"])
        mlflow.start_run(run_id=tracker.run_id)
        return True
    except Exception as e:  # noqa: BLE001
        log.debug("fluent MLflow run not activated: %s", e)
        return False
