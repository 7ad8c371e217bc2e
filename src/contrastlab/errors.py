"""contrastlab's error types for bad input.

A stage that fails because of what the user gave it (a params value, a missing or malformed
data file, an unknown name) raises :class:`InputError` (or ``UnknownNameError``, also a
``KeyError``; ``contrastlab.params.ParamsError``); ``contrastlab.cli.run_stage`` reports it
as one line, ``error: <message>``, exit status 2. Other exceptions keep their traceback.
"""

from __future__ import annotations

import ast

__all__ = ["InputError", "UnknownNameError", "parse_python"]


class InputError(ValueError):
    """Bad user input (params, data files, names); reported without a traceback."""


class UnknownNameError(InputError, KeyError):
    """A name missing from a table of known names (loss, data set, variant)."""

    def __str__(self) -> str:  # KeyError would print repr(message)
        return BaseException.__str__(self)


def parse_python(source: str, what: str = "source", error: type = ValueError) -> ast.Module:
    """``ast.parse(source)``; a ``SyntaxError`` becomes ``error("<what> does not parse: ...")``."""
    try:
        return ast.parse(source)
    except SyntaxError as e:
        raise error(f"{what} does not parse: {e}") from None
