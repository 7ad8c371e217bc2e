"""Progress bars that stay readable in logs.

On a terminal, :func:`tqdm` is ``tqdm.auto.tqdm`` unchanged. When the stream is not a
terminal (``dvc queue logs``, CI, ``nohup ... > log``), tqdm's carriage-return redraws would
pile up as one endless line; instead the bar prints a plain line (``\\r`` dropped, ASCII
bar) at most every ``CONTRASTLAB_PROGRESS_INTERVAL`` seconds (default 30) plus the final
state. ``CONTRASTLAB_PROGRESS=0`` turns the bars off everywhere.

Use it as a drop-in: ``from contrastlab.progress import tqdm``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, TextIO

from tqdm.auto import tqdm as _tqdm

__all__ = ["tqdm", "is_interactive"]


def is_interactive(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default ``sys.stderr``, where tqdm writes) is a terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or file-like without isatty
        return False


class _Lines:
    """File wrapper turning tqdm's ``\\r``-redraws into whole lines."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, s: str) -> int:
        text = s.replace("\r", "").replace("\x1b[A", "").strip()
        if text:
            self._stream.write(text + "\n")
        return len(s)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False


def tqdm(iterable: Iterable | None = None, *args: Any, **kwargs: Any) -> _tqdm:
    """``tqdm.auto.tqdm(iterable, ...)`` with log-friendly settings off a terminal.

    Same arguments as tqdm. Off a terminal: ``mininterval`` defaults to
    ``CONTRASTLAB_PROGRESS_INTERVAL`` seconds (30), ``ascii=True``, ``ncols=100`` and every
    refresh is a separate line. An explicit ``disable=True`` is kept; ``CONTRASTLAB_PROGRESS=0``
    disables every bar.
    """
    if os.environ.get("CONTRASTLAB_PROGRESS", "1").lower() in {"0", "false", "no", "off"}:
        kwargs["disable"] = True
    stream = kwargs.get("file") or sys.stderr
    if not is_interactive(stream):
        interval = float(os.environ.get("CONTRASTLAB_PROGRESS_INTERVAL", "30"))
        kwargs["mininterval"] = max(float(kwargs.get("mininterval", 0.1)), interval)
        kwargs.setdefault("maxinterval", max(interval * 2, 10.0))
        kwargs.setdefault("ascii", True)
        kwargs.setdefault("ncols", 100)
        kwargs["file"] = _Lines(stream)
        kwargs["leave"] = True  # the final state is the line worth keeping in a log
    return _tqdm(iterable, *args, **kwargs)
