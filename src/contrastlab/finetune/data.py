"""HumanEval variants for encoder fine-tuning (:mod:`contrastlab.data.humaneval`): texts,
multi-hot labels ``problem_<id>`` + ``tier_<tier>``, the evaluation splits and a
problem-balanced batch sampler.

Splits (:func:`make_splits`): ``test_b`` (unseen problems: a ``test_problem_fraction`` of the
problems, all their variants); ``test_a`` (unseen submissions of seen problems: per (problem,
tier) cell ``round(test_fraction * n)`` variants, at most ``n - 1``); ``val`` (the same rule
with ``val_fraction`` on what is left); ``train`` (the rest).
"""

from __future__ import annotations

import ast
from typing import Iterator

import numpy as np
import torch

from ..errors import InputError, parse_python

__all__ = ["strip_docstrings", "make_splits", "label_matrix", "label_names", "PKSampler",
           "SPLITS", "TIERS"]

SPLITS = ("train", "val", "test_a", "test_b")
TIERS = ("PASS", "PARTIAL", "FAIL")


def strip_docstrings(source: str) -> str:
    """``source`` without module, class and function docstrings (``ast.unparse`` output).

    Raises:
        InputError: the source does not parse.
    """
    tree = parse_python(source, "source", InputError)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def make_splits(problems, tiers, *, test_problem_fraction: float, test_fraction: float,
                val_fraction: float, seed: int) -> np.ndarray:
    """Split labels (``train`` / ``val`` / ``test_a`` / ``test_b``) of ``N`` variants.

    Args:
        problems, tiers: ``[N]`` problem ids and tiers (any hashable values).
        test_problem_fraction: share of problems held out whole (split b; at least 1, at most
            all but 1 problem).
        test_fraction, val_fraction: per (problem, tier) cell shares (split a, validation).
        seed: NumPy generator seed.

    Returns:
        ``[N]`` object array of split names (module docstring).

    Raises:
        InputError: lengths differ or fewer than 2 problems.
    """
    problems = np.asarray(problems, dtype=object)
    tiers = np.asarray(tiers, dtype=object)
    if problems.shape != tiers.shape or problems.ndim != 1:
        raise InputError(f"problems {problems.shape} and tiers {tiers.shape} must be equal-length 1-D")
    uniq = sorted(set(problems.tolist()), key=str)
    if len(uniq) < 2:
        raise InputError("need at least 2 problems to hold out unseen problems")
    rng = np.random.default_rng(seed)
    n_b = min(len(uniq) - 1, max(1, int(round(test_problem_fraction * len(uniq)))))
    held = {uniq[i] for i in rng.permutation(len(uniq))[:n_b]}
    split = np.full(len(problems), "train", dtype=object)
    split[np.array([p in held for p in problems], dtype=bool)] = "test_b"
    cells: dict[tuple, list[int]] = {}
    for i, (p, t) in enumerate(zip(problems, tiers)):
        if p not in held:
            cells.setdefault((str(p), str(t)), []).append(i)
    for key in sorted(cells):
        idx = rng.permutation(np.asarray(cells[key]))
        n = len(idx)
        k_test = min(n - 1, int(np.floor(test_fraction * n + 0.5)))
        k_val = min(n - 1 - k_test, int(np.floor(val_fraction * (n - k_test) + 0.5)))
        split[idx[:k_test]] = "test_a"
        split[idx[k_test:k_test + k_val]] = "val"
    return split


def label_names(problems) -> list[str]:
    """``problem_<id>`` for each distinct problem (sorted as strings), then ``tier_<tier>``."""
    return [f"problem_{p}" for p in sorted({str(p) for p in problems})] + [f"tier_{t}" for t in TIERS]


def label_matrix(problems, tiers, names: list[str]) -> torch.Tensor:
    """Multi-hot float32 ``[N, C]`` with ``problem_<p>`` and ``tier_<t>`` set per row.

    Raises:
        InputError: a problem or tier without a column in ``names``.
    """
    col = {n: i for i, n in enumerate(names)}
    y = torch.zeros(len(problems), len(names), dtype=torch.float32)
    for r, (p, t) in enumerate(zip(problems, tiers)):
        for key in (f"problem_{p}", f"tier_{t}"):
            if key not in col:
                raise InputError(f"label {key!r} has no column")
            y[r, col[key]] = 1.0
    return y


class PKSampler:
    """Batches of ``P`` problems x up to ``M`` variants each (Hermans, Beyer & Leibe 2017,
    "In Defense of the Triplet Loss", Sec. 3.2 "batch hard" sampling), so every anchor has
    same-problem positives in its batch. Problems with one variant are drawn like the others.

    Args:
        groups: ``[N]`` problem id per training row.
        p, m: problems per batch and variants per problem.
        generator: ``torch.Generator`` (the only source of randomness).

    Iterating yields ``LongTensor`` row indices (``<= P * M`` each), forever.

    Raises:
        InputError: fewer than 2 problems.
    """

    def __init__(self, groups, p: int, m: int, generator: torch.Generator):
        g = np.asarray(groups)
        self.members = [torch.as_tensor(np.flatnonzero(g == k)) for k in sorted(set(g.tolist()), key=str)]
        if len(self.members) < 2:
            raise InputError("the batch sampler needs at least 2 problems")
        self.p = min(p, len(self.members))
        self.m = m
        self.gen = generator

    def __iter__(self) -> Iterator[torch.Tensor]:
        while True:
            order = torch.randperm(len(self.members), generator=self.gen)
            for s in range(0, len(order) - self.p + 1, self.p):
                rows = []
                for k in order[s:s + self.p].tolist():
                    mem = self.members[k]
                    pick = torch.randperm(len(mem), generator=self.gen)[: self.m]
                    rows.append(mem[pick])
                yield torch.cat(rows)
