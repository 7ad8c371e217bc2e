"""Small shared helpers: repository root, seeding, CPU threads, git commit, forked workers."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import torch


def repo_root(start: Path | None = None) -> Path:
    """Return the project root: the nearest parent holding ``params.yaml`` or ``.git``.

    Falls back to the current working directory when neither is found.
    """
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "params.yaml").exists() or (p / ".git").exists():
            return p
    return here


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch (CPU and CUDA) and return a CPU generator seeded alike.

    With ``torch.use_deterministic_algorithms`` left at its default, CPU runs are bitwise
    repeatable for the operations this project uses.
    """
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def set_cpu_threads(n: int | None = None) -> int:
    """Set PyTorch's intra-op threads to ``n`` (default: ``CONTRASTLAB_THREADS`` or all cores)."""
    if n is None:
        n = int(os.environ.get("CONTRASTLAB_THREADS", "0")) or (os.cpu_count() or 1)
    torch.set_num_threads(max(1, n))
    return torch.get_num_threads()


def git_commit(root: Path | None = None) -> str:
    """Return the current git commit hash (with ``-dirty`` appended when tracked source files
    have uncommitted changes; the pipeline's own outputs, ``reports/`` and ``dvc.lock``, do
    not count, since every run rewrites them).

    Returns ``"unknown"`` outside a git checkout.
    """
    root = root or repo_root()
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
             ":(exclude)reports", ":(exclude)dvc.lock"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def pick_device(requested: str = "auto") -> torch.device:
    """Map ``"auto" | "cpu" | "cuda" | "cuda:N"`` to a ``torch.device`` (auto: CUDA when present)."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


#: The function of the running :func:`fork_map` (set before the fork, read by the children).
_FORK_JOB: dict[str, Callable[[Any], Any]] = {}


def _fork_call(item: Any) -> Any:
    return _FORK_JOB["fn"](item)


def fork_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int) -> Iterator[Any]:
    """``fn(item)`` for every item in ``min(workers, len(items))`` forked processes, yielded in
    ``items`` order; ``fn`` and what it refers to (models, tensors) are inherited by the fork,
    only the items and results are pickled. An exception in a worker is re-raised here."""
    items = list(items)
    _FORK_JOB["fn"] = fn
    try:
        with ProcessPoolExecutor(min(workers, len(items)),
                                 mp_context=mp.get_context("fork")) as pool:
            yield from pool.map(_fork_call, items)
    finally:
        _FORK_JOB.clear()
