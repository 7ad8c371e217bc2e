"""Entry-point wrapper for stage scripts: bad input ends with one clear line, bugs with a traceback.

``run_stage(main, invocation)`` calls ``main()`` inside ``invocation`` (the pipeline
invocation the stage runs in, :mod:`contrastlab.invocation`) and turns the errors that mean
"bad input" into ``error: <message>`` on stderr and exit status 2: :class:`contrastlab.errors.InputError`
(a params file that fails validation is its subclass ``ParamsError``; an unknown name is
``UnknownNameError``), ``FileNotFoundError`` (a missing input file) and
``FloatingPointError`` (a loss that diverged to NaN/inf under the given hyperparameters).
Any other exception (a plain ``ValueError``, ``KeyError``, ``TypeError``... raised by the
code rather than about the input) is a bug: it propagates with its traceback (exit status 1).
Set ``CONTRASTLAB_DEBUG=1`` to see the traceback of input errors as well. Outputs are
written atomically by the stages, so nothing half-written is left for DVC to cache.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Callable

from .errors import InputError
from .invocation import Invocation, using

#: Exceptions reported as bad input (exit status 2, one line).
INPUT_ERRORS: tuple[type[BaseException], ...] = (InputError, FileNotFoundError, FloatingPointError)


def run_stage(main: Callable[[], int | None], invocation: Invocation | None = None) -> int:
    """Run a stage's ``main`` inside ``invocation`` (None: an empty one, outside any
    experiment); map input errors to exit status 2 with a one-line message.

    Returns:
        ``main()``'s return value as an int (0 for None), or 2 after an input error.

    Raises:
        Any exception that is not in :data:`INPUT_ERRORS`, unchanged (traceback shown).
    """
    try:
        with using(invocation or Invocation()):
            rc = main()
        return int(rc or 0)
    except INPUT_ERRORS as e:
        if os.environ.get("CONTRASTLAB_DEBUG"):
            traceback.print_exc()
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        from .launch import report_worker_error  # a torchrun worker: the launcher prints it once

        if not report_worker_error(str(msg)):
            print(f"error: {msg}", file=sys.stderr)
        return 2


def stage_parser(doc: str | None, *paths: str) -> argparse.ArgumentParser:
    """The ``argparse`` parser of a stage script: ``doc`` as its description, ``--params``
    (default ``params.yaml``, DVC's default params file) and one required option per name in
    ``paths`` (e.g. ``"--data"``, ``"--metrics"``).

    A stage's input and output paths are written in one place, its ``cmd`` in ``dvc.yaml``,
    beside the ``deps`` and ``outs`` that declare them; the scripts hold no copy. Run one
    stage with ``dvc repro <stage>``, or by hand with the command ``dvc.lock`` records for it.

    Returns:
        The parser; the stage adds its other options (``--variant`` ...) and parses.
    """
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    for opt in paths:
        ap.add_argument(opt, required=True, metavar="PATH",
                        help="path as in the stage's cmd in dvc.yaml")
    return ap
