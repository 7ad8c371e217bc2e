"""Entry-point wrapper for stage scripts: bad input ends with one clear line, bugs with a traceback.

``run_stage(main)`` calls ``main()`` and turns the errors that mean "bad input" into
``error: <message>`` on stderr and exit status 2: :class:`contrastlab.errors.InputError`
(a params file that fails validation is its subclass ``ParamsError``; an unknown name is
``UnknownNameError``), ``FileNotFoundError`` (a missing input file) and
``FloatingPointError`` (a loss that diverged to NaN/inf under the given hyperparameters).
Any other exception (a plain ``ValueError``, ``KeyError``, ``TypeError``... raised by the
code rather than about the input) is a bug: it propagates with its traceback (exit status 1).
Set ``CONTRASTLAB_DEBUG=1`` to see the traceback of input errors as well. Outputs are
written atomically by the stages, so nothing half-written is left for DVC to cache.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Callable

from .errors import InputError

#: Exceptions reported as bad input (exit status 2, one line).
INPUT_ERRORS: tuple[type[BaseException], ...] = (InputError, FileNotFoundError, FloatingPointError)


def run_stage(main: Callable[[], int | None]) -> int:
    """Run a stage's ``main``; map input errors to exit status 2 with a one-line message.

    Returns:
        ``main()``'s return value as an int (0 for None), or 2 after an input error.

    Raises:
        Any exception that is not in :data:`INPUT_ERRORS`, unchanged (traceback shown).
    """
    try:
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
