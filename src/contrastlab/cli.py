"""Entry-point wrapper for stage scripts: bad input ends with one clear line, bugs with a traceback.

``run_stage(main, invocation)`` calls ``main()`` inside ``invocation``
(:mod:`contrastlab.invocation`) and turns bad-input errors into ``error: <message>`` on stderr,
exit status 2: :class:`contrastlab.errors.InputError` (and its ``ParamsError``,
``UnknownNameError``), ``FileNotFoundError``, ``FloatingPointError`` (a diverged loss),
``IsADirectoryError``, ``NotADirectoryError``, ``PermissionError``, ``UnicodeDecodeError``.
Any other exception is a bug and keeps its traceback (exit status 1);
``CONTRASTLAB_DEBUG=1`` shows tracebacks of input errors too.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import traceback
from pathlib import Path
from typing import Callable

from .errors import InputError
from .invocation import Invocation, using

#: Exceptions reported as bad input (exit status 2, one line).
INPUT_ERRORS: tuple[type[BaseException], ...] = (InputError, FileNotFoundError, FloatingPointError,
                                                 IsADirectoryError, NotADirectoryError,
                                                 PermissionError, UnicodeDecodeError)

#: Largest text input (bytes) an entry point reads: params files, source files, JSON lists.
MAX_TEXT_BYTES = 16 << 20


class ArgParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors (a missing option, ``-k x``, a value an
    option's ``type`` rejects) are one line, ``error: <prog>: <message>``, and exit status 2
    (argparse's own exit status for usage errors, without its usage block)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {self.prog}: {' '.join(message.split())}", file=sys.stderr)
        sys.exit(2)


def read_text_file(path: str | Path, what: str = "file", *, max_bytes: int = MAX_TEXT_BYTES,
                   allow_empty: bool = False) -> str:
    """The text of a user-given file, or an :class:`InputError` that says what is wrong.

    Args:
        path: the file.
        what: what the file is, for the message (``"params file"``, ``"--code file"``).
        max_bytes: larger files are refused before they are read.
        allow_empty: accept a file holding only white space.

    Returns:
        The file's text (UTF-8).

    Raises:
        InputError: missing, a directory or other non-regular file, unreadable, larger than
            ``max_bytes``, empty, binary (holds a NUL byte) or not UTF-8.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such {what}")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a {what}")
    if not p.is_file():
        raise InputError(f"{p}: not a regular file (a {what} is expected)")
    size = p.stat().st_size
    if size > max_bytes:
        raise InputError(f"{p}: {what} is {size / 2**20:.1f} MiB; the limit is "
                         f"{max_bytes / 2**20:.0f} MiB")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise InputError(f"{p}: cannot read the {what} ({e.strerror or e})") from None
    nul = raw.find(b"\0")
    if nul >= 0:
        raise InputError(f"{p}: binary data (a NUL byte at offset {nul}), not a text {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start});"
                         f" save the {what} as UTF-8") from None
    if not allow_empty and not text.strip():
        raise InputError(f"{p}: the {what} is empty")
    return text


def text_file(what: str, *, max_bytes: int = MAX_TEXT_BYTES) -> Callable[[str], str]:
    """An argparse ``type=``: checks the file with :func:`read_text_file` while parsing (so a
    bad file is a one-line usage error) and returns the path unchanged."""

    def check(path: str) -> str:
        try:
            read_text_file(path, what, max_bytes=max_bytes)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return path

    check.__name__ = what  # argparse names the type in some messages
    return check


def params_file(path: str) -> str:
    """An argparse ``type=`` for ``--params``: a readable UTF-8 text file that parses as YAML
    (the schema is checked later, by :func:`contrastlab.params.load_params`)."""
    import yaml

    try:
        yaml.safe_load(read_text_file(path, "params file"))
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise argparse.ArgumentTypeError(f"{path}: not valid YAML ({where}{what})") from None
    return path


def python_source(text: str, path: str | Path) -> str:
    """``text`` if it parses as Python, else an :class:`InputError` naming the line.

    Raises:
        InputError: a syntax error (line and message in the text).
    """
    try:
        ast.parse(text)
    except SyntaxError as e:
        raise InputError(f"{path}: not valid Python (line {e.lineno}: {e.msg})") from None
    except ValueError as e:  # e.g. NUL bytes in a string given directly
        raise InputError(f"{path}: not valid Python ({e})") from None
    return text


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
        if isinstance(e, UnicodeDecodeError):
            msg = f"input is not UTF-8 text ({e})"
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
        The parser (:class:`ArgParser`: usage errors are one line, exit status 2; the params
        file is checked by :func:`params_file` while parsing); the stage adds its other
        options (``--variant`` ...) and parses.
    """
    ap = ArgParser(description=doc)
    ap.add_argument("--params", default="params.yaml", type=params_file,
                    help="params file (default: params.yaml)")
    for opt in paths:
        ap.add_argument(opt, required=True, metavar="PATH",
                        help="path as in the stage's cmd in dvc.yaml")
    return ap
