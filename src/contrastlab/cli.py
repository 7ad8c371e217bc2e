"""Entry-point wrapper for stage scripts: bad input ends with one clear line, not a traceback.

``run_stage(main)`` calls ``main()`` and turns the errors that mean "bad input" (a params
file that fails validation, a missing input file, a malformed data file, a NaN loss) into
``error: <message>`` on stderr and exit status 2. Set ``CONTRASTLAB_DEBUG=1`` to see the
traceback as well. Outputs are written atomically by the stages, so nothing half-written
is left for DVC to cache.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Callable

from .params import ParamsError

#: Exceptions reported as bad input (exit status 2).
INPUT_ERRORS: tuple[type[BaseException], ...] = (
    ParamsError, FileNotFoundError, ValueError, FloatingPointError, KeyError,
)


def run_stage(main: Callable[[], int | None]) -> int:
    """Run a stage's ``main`` and map input errors to exit status 2 with a one-line message."""
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
