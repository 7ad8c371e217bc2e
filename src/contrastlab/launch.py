"""``python -m contrastlab.launch [torchrun options] SCRIPT [ARGS]``: torchrun, one-line failures.

Runs ``torch.distributed.run`` in-process with the same options. A worker whose stage fails on
bad input (``contrastlab.cli.run_stage``) writes its message to ``TORCHELASTIC_ERROR_FILE``;
the launcher catches ``ChildFailedError``, prints the first failure once as
``error: <message>`` and exits with that worker's status (2 for bad input). torchelastic's
logs are silenced unless ``CONTRASTLAB_DEBUG`` is set. An unexpected exception keeps its
traceback; the launcher adds one line naming the rank and exit status.
"""

from __future__ import annotations

import json
import os
import sys
import time

__all__ = ["main", "report_worker_error", "LAUNCHER_ENV"]

#: Set to ``1`` in the workers' environment by this launcher.
LAUNCHER_ENV = "CONTRASTLAB_LAUNCHER"


def report_worker_error(message: str) -> bool:
    """In a worker started by this launcher, record ``message`` for the launcher to print.

    Writes torchelastic's error-file JSON (``{"message": str, "timestamp": int seconds}``)
    to ``$TORCHELASTIC_ERROR_FILE``.

    Returns:
        True when recorded (the caller prints nothing), False outside this launcher or when
        the file cannot be written (the caller prints the message itself).
    """
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or os.environ.get(LAUNCHER_ENV) != "1":
        return False
    rank = os.environ.get("RANK")
    text = f"{message} (rank {rank})" if rank not in (None, "0") else str(message)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"message": text, "timestamp": int(time.time())}, fh)
    except OSError:
        return False
    return True


def _failure_line(err) -> tuple[str, int]:
    """(message, exit status) of a ``ChildFailedError``'s first failure."""
    rank, failure = err.get_first_failure()
    msg = failure.message
    if isinstance(msg, dict):  # torch's own @record format
        msg = msg.get("message", "")
    code = int(failure.exitcode)
    if not msg or str(msg).startswith("To enable traceback"):
        msg = f"{err.name}: worker rank {rank} failed with exit status {code}"
        if code == 1:
            msg += " (its traceback is above)"
    status = code if 0 < code < 256 else (128 - code if code < 0 else 1)
    return str(msg), status


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with ``argv``; returns 0, or the first failed worker's exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = bool(os.environ.get("CONTRASTLAB_DEBUG"))
    os.environ[LAUNCHER_ENV] = "1"  # inherited by the workers
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    if not debug:  # torchelastic sets levels on its own loggers: quiet each of them
        import logging

        for name in list(logging.root.manager.loggerDict):
            if name.startswith("torch.distributed"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
        logging.getLogger("torch.distributed").setLevel(logging.CRITICAL)
    args = parse_args(argv)
    try:
        run(args)
    except ChildFailedError as e:
        msg, status = _failure_line(e)
        print(f"error: {msg}", file=sys.stderr)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
