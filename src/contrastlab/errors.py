"""contrastlab's error types for bad input.

A stage that fails because of what the user gave it (a params value, a missing or malformed
data file, an unknown name) raises :class:`InputError`; ``contrastlab.cli.run_stage``
reports it as one line, ``error: <message>``, with exit status 2. Every other exception is
a bug or an environment failure and keeps its traceback.

- :class:`InputError` (a ``ValueError``): bad input, with a message that says what to fix.
- :class:`UnknownNameError` (an ``InputError`` and a ``KeyError``): a name that is not in a
  table (a loss, a data set, a variant); ``except KeyError`` still catches it, and its
  message prints without the quotes ``KeyError`` adds.
- ``contrastlab.params.ParamsError`` (an ``InputError``): a params file that fails validation.
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
