"""Train / val / test split by repository (repository-stratified as in the retrieval experiment notes; RNG seed 42).

Whole repositories go to one split, so a test signature's repository never appeared in
training. Repositories are visited in a seeded random order and each goes to the split
whose share of functions is furthest below its target fraction; with at least three
repositories every split gets one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError

__all__ = ["split_by_repository", "SPLITS"]

SPLITS = ("train", "val", "test")


def split_by_repository(repo_sizes: dict[str, int], fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
                        seed: int = 42) -> dict[str, str]:
    """Assign each repository to ``train``, ``val`` or ``test``.

    Args:
        repo_sizes: repository name -> number of functions (> 0).
        fractions: target share of functions for train, val, test (sum 1).
        seed: order of the greedy assignment.

    Returns:
        repository name -> split name.

    Raises:
        ValueError: fewer than 3 repositories, or fractions not summing to 1.
    """
    if len(repo_sizes) < 3:
        raise InputError(f"need at least 3 repositories to split by repository, got {len(repo_sizes)}")
    if abs(sum(fractions) - 1.0) > 1e-6:
        raise InputError(f"split fractions must sum to 1, got {fractions}")
    names = sorted(repo_sizes)
    rng = np.random.default_rng(seed)
    order = [names[i] for i in rng.permutation(len(names))]
    total = float(sum(repo_sizes.values()))
    counts = np.zeros(3)
    target = np.asarray(fractions) * total
    out: dict[str, str] = {}
    for name in order:
        # the split furthest below its target share (train first on ties), so with three
        # or more repositories every split receives one
        j = int(np.argmax((target - counts) / target))
        out[name] = SPLITS[j]
        counts[j] += repo_sizes[name]
    return out


def split_summary(df: Any) -> dict[str, Any]:
    """Counts of functions and repositories per split (``df`` has ``repo`` and ``split``)."""
    out: dict[str, Any] = {}
    for s in SPLITS:
        part = df[df["split"] == s]
        out[s] = {"functions": int(len(part)), "repositories": sorted(part["repo"].unique().tolist())}
    return out
