"""The pipeline invocation a stage runs in: the experiment's name, the commit it started from,
and the repository whose tracking store its runs go to.

The library reads no workflow tool's variables. The stage scripts translate what ``dvc repro``
and ``dvc exp run`` tell them (``stages/_dvc.py``) and hand the result to
:func:`contrastlab.cli.run_stage`, which makes it :func:`current` while the stage runs. A
notebook or another workflow tool does the same with :func:`using`::

    with using(Invocation(experiment="lr-sweep-3")):
        run_final(...)          # its MLflow runs are named and tagged "lr-sweep-3"
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


@dataclass(frozen=True)
class Invocation:
    """One pipeline invocation.

    Attributes:
        experiment: the experiment's name (``dvc exp run`` names them, e.g. ``tangy-rail``),
            or None outside an experiment. It names MLflow runs, is their ``dvc_exp_name``
            tag, groups them under one parent run per track, and heads the report.
        baseline_rev: the commit (40 hex) the experiment started from (tag
            ``dvc_exp_baseline``), or None.
        store_root: the repository whose ``mlflow.db`` and ``mlartifacts`` the runs go to,
            or None for the repository found from the working directory. Set it when the
            stage runs in a temporary copy of the repository (``dvc exp run --queue``).
    """

    experiment: str | None = None
    baseline_rev: str | None = None
    store_root: Path | None = None


_STACK: list[Invocation] = [Invocation()]


def current() -> Invocation:
    """The invocation in force (an empty :class:`Invocation` outside :func:`using`)."""
    return _STACK[-1]


@contextlib.contextmanager
def using(invocation: Invocation) -> Iterator[Invocation]:
    """Make ``invocation`` :func:`current` inside the ``with`` block (nests; restored on
    exit, also after an exception). Processes forked inside the block inherit it."""
    _STACK.append(invocation)
    try:
        yield invocation
    finally:
        _STACK.pop()
