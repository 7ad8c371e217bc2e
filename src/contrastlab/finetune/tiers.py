r"""Within-problem tier metrics: does an embedding rank a query's same-tier variants of its own
problem above the other-tier ones? (kNN purity mostly measures problem clustering;
docs/finetune.md.)

For a query ``q``: candidates ``C`` = the corpus rows of ``q``'s problem (corpora of
:mod:`.metrics`; split b leave-one-out), ``S`` those of ``q``'s tier, ``O = C \ S``, ``s``
the cosine similarity.

- ``wp_auc``: share of pairs ``(x in S, o in O)`` with ``s(q, x) > s(q, o)``, ties one half
  (Mann-Whitney form of the ROC AUC, Hanley & McNeil 1982, Radiology 143, Eq. 1-2); defined
  when ``S`` and ``O`` are non-empty.
- ``wp_nn_tier``: 1 when the nearest candidate has ``q``'s tier (ties: the same-tier share);
  defined when ``O`` is non-empty (empty ``S`` scores 0).
- ``wp_pair_sep``: over ``o in O`` at most one token edit from ``q``
  (:data:`contrastlab.finetune.tfidf.TOKEN_PATTERN` tokens; Levenshtein 1966), the share with
  ``max_{x in S} s(q, x) > s(q, o)`` (ties one half; 0 when ``S`` is empty).

Reference rows (:data:`REFERENCES`, from the labels alone): ``tierblind`` (own problem first,
random order inside: ``wp_auc`` 1/2, ``wp_nn_tier`` ``|S|/|C|``, ``wp_pair_sep``
``|S|/(|S|+1)``, ``knn{k}_pxt`` ``min(k, |C|) |S| / (|C| k)``) and ``ceiling`` (``wp_auc`` 1,
the others ``[|S| >= 1]``, ``knn{k}_pxt`` ``min(k, |S|) / k``). Arrays are per query,
float64, NaN where undefined (the pattern depends on labels and texts only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError
from .metrics import split_rows

__all__ = ["TIER_METRICS", "REFERENCES", "Reference", "CHANCE", "CEILING", "ProblemSets", "code_tokens", "within_one_edit",
           "problem_sets", "within_problem_metrics", "reference_metrics", "split_sets",
           "tier_items"]

#: The within-problem metrics (module docstring), in table order.
TIER_METRICS = ("wp_auc", "wp_nn_tier", "wp_pair_sep")


@dataclass(frozen=True)
class Reference:
    """A row computed from the labels alone: ``competes`` = an attainable ranking, so a
    candidate for the strongest baseline (the tier-blind reference), or a bound (the
    ceiling), shown with its interval only."""

    title: str
    short: str
    competes: bool


#: The reference rows (module docstring), in table order.
REFERENCES = {"tierblind": Reference("tier-blind reference (own problem first, random order inside)",
                                     "tier-blind", True),
              "ceiling": Reference("ceiling (best any embedding can reach)", "ceiling", False)}
#: The row names of the chance level and the bound (keys of :data:`REFERENCES`).
CHANCE, CEILING = "tierblind", "ceiling"


def code_tokens(text: str) -> list[str]:
    """Code tokens of ``text``: identifiers, integers, runs of operator characters
    (:data:`contrastlab.finetune.tfidf.TOKEN_PATTERN`)."""
    from .tfidf import TOKEN_PATTERN

    return re.findall(TOKEN_PATTERN, text)


def within_one_edit(a: Sequence, b: Sequence) -> bool:
    """True when the Levenshtein distance of the sequences ``a`` and ``b`` is at most 1 (one
    insertion, deletion or substitution of an element)."""
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    i = 0
    while i < min(la, lb) and a[i] == b[i]:
        i += 1
    if i == la == lb:
        return True
    if la == lb:
        return list(a[i + 1:]) == list(b[i + 1:])
    if la > lb:
        return list(a[i + 1:]) == list(b[i:])
    return list(a[i:]) == list(b[i + 1:])


@dataclass
class ProblemSets:
    """Per query of one split: ``cands[i]`` corpus indices of its problem (itself excluded),
    ``same[i]`` bool (same tier), ``near[i]`` bool (at most one code token apart)."""

    cands: list[np.ndarray]
    same: list[np.ndarray]
    near: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.cands)


def problem_sets(prob_q, tier_q, tok_q, prob_c, tier_c, tok_c, *, loo: bool) -> ProblemSets:
    """The candidate sets of :class:`ProblemSets`.

    Args:
        prob_q, tier_q, tok_q: ``[Q]`` problems, tiers and token lists of the queries.
        prob_c, tier_c, tok_c: ``[N]`` the same of the corpus.
        loo: the queries are the corpus (same order); a row is not its own candidate.

    Raises:
        InputError: lengths disagree (or ``loo`` with different query and corpus lengths).
    """
    prob_q, tier_q = np.asarray(prob_q, dtype=object), np.asarray(tier_q, dtype=object)
    prob_c, tier_c = np.asarray(prob_c, dtype=object), np.asarray(tier_c, dtype=object)
    if not (len(prob_q) == len(tier_q) == len(tok_q)) or not (len(prob_c) == len(tier_c) == len(tok_c)):
        raise InputError("problems, tiers and tokens differ in length")
    if loo and len(prob_q) != len(prob_c):
        raise InputError("leave-one-out needs the queries to be the corpus")
    by_problem: dict = {}
    for j, p in enumerate(prob_c):
        by_problem.setdefault(p, []).append(j)
    cands, same, near = [], [], []
    for i, p in enumerate(prob_q):
        c = np.array([j for j in by_problem.get(p, []) if not (loo and j == i)], dtype=np.int64)
        cands.append(c)
        same.append(np.array([tier_c[j] == tier_q[i] for j in c], dtype=bool))
        near.append(np.array([within_one_edit(tok_q[i], tok_c[j]) for j in c], dtype=bool))
    return ProblemSets(cands, same, near)


def _metrics_from_scores(scores: Sequence[np.ndarray], sets: ProblemSets) -> dict[str, np.ndarray]:
    n = len(sets)
    out = {m: np.full(n, np.nan) for m in TIER_METRICS}
    for i in range(n):
        sim, same, near = scores[i], sets.same[i], sets.near[i]
        xs, os_ = sim[same], sim[~same]
        if len(os_) and len(xs):
            out["wp_auc"][i] = float(np.mean((xs[:, None] > os_[None, :])
                                             + 0.5 * (xs[:, None] == os_[None, :])))
        if len(os_):
            top = sim == sim.max()
            out["wp_nn_tier"][i] = float(same[top].mean())
        mut = sim[~same & near]
        if len(mut):
            if len(xs):
                best = xs.max()
                out["wp_pair_sep"][i] = float(np.mean((best > mut) + 0.5 * (best == mut)))
            else:
                out["wp_pair_sep"][i] = 0.0
    return out


def within_problem_metrics(emb_q: torch.Tensor, emb_c: torch.Tensor, sets: ProblemSets
                           ) -> dict[str, np.ndarray]:
    """``wp_auc``, ``wp_nn_tier``, ``wp_pair_sep`` per query (module docstring).

    Args:
        emb_q: ``[Q, D]`` query embeddings, emb_c: ``[N, D]`` corpus embeddings (any scale;
            rows are L2-normalised here: cosine similarity).
        sets: :func:`problem_sets` of these queries and corpus.

    Returns:
        ``{metric: float64 [Q]}`` in ``[0, 1]``, NaN where undefined.

    Raises:
        InputError: ``len(sets) != Q``.
    """
    if len(sets) != len(emb_q):
        raise InputError(f"{len(sets)} candidate sets for {len(emb_q)} queries")
    q = F.normalize(torch.as_tensor(emb_q).float(), dim=1)
    c = F.normalize(torch.as_tensor(emb_c).float(), dim=1)
    sim = (q @ c.T).numpy().astype(np.float64)
    return _metrics_from_scores([sim[i, sets.cands[i]] for i in range(len(sets))], sets)


def reference_metrics(sets: ProblemSets, k: int) -> dict[str, dict[str, np.ndarray]]:
    """The :data:`REFERENCES` rows of one split: ``{"tierblind": {metric: [Q]}, "ceiling":
    {...}}`` with the :data:`TIER_METRICS` and ``knn{k}_pxt`` (module docstring; same NaN
    pattern as :func:`within_problem_metrics`)."""
    n = len(sets)
    blind = {m: np.full(n, np.nan) for m in TIER_METRICS}
    ceil = {m: np.full(n, np.nan) for m in TIER_METRICS}
    blind[f"knn{k}_pxt"], ceil[f"knn{k}_pxt"] = np.zeros(n), np.zeros(n)  # not a row name (metric)
    for i in range(n):
        same, near = sets.same[i], sets.near[i]
        n_c, n_s = len(same), int(same.sum())
        n_o = n_c - n_s
        if n_c:
            blind[f"knn{k}_pxt"][i] = min(k, n_c) * n_s / (n_c * k)  # not a row name (metric)
        ceil[f"knn{k}_pxt"][i] = min(k, n_s) / k  # not a row name (metric)
        if n_s and n_o:
            blind["wp_auc"][i], ceil["wp_auc"][i] = 0.5, 1.0
        if n_o:
            blind["wp_nn_tier"][i], ceil["wp_nn_tier"][i] = n_s / n_c, float(n_s > 0)
        if (~same & near).any():
            blind["wp_pair_sep"][i], ceil["wp_pair_sep"][i] = n_s / (n_s + 1), float(n_s > 0)
    return {CHANCE: blind, CEILING: ceil}


def split_sets(problems, tiers, split, texts) -> dict[str, tuple[np.ndarray, np.ndarray, ProblemSets]]:
    """Queries, corpus and :class:`ProblemSets` of splits ``a`` (``test_a`` vs ``train``),
    ``b`` (``test_b`` leave-one-out) and ``val`` (``val`` vs ``train``; absent without
    validation rows): ``{split: (query rows, corpus rows, sets)}``.

    Raises:
        InputError: lengths disagree, or ``train``, ``test_a`` or ``test_b`` is empty.
    """
    problems = np.asarray(problems, dtype=object)
    tiers = np.asarray(tiers, dtype=object)
    split = np.asarray(split, dtype=object)
    if not (len(problems) == len(tiers) == len(split) == len(texts)):
        raise InputError("problems, tiers, split and texts differ in length")
    toks = [code_tokens(t) for t in texts]
    idx = split_rows(split)
    out = {}
    for name, qs, cs, loo in (("a", "test_a", "train", False), ("b", "test_b", "test_b", True),
                              ("val", "val", "train", False)):
        q, c = idx[qs], idx[cs]
        if not len(q):
            continue
        out[name] = (q, c, problem_sets(problems[q], tiers[q], [toks[i] for i in q],
                                        problems[c], tiers[c], [toks[j] for j in c], loo=loo))
    return out


def tier_items(emb: torch.Tensor, sets: dict) -> dict[str, dict[str, np.ndarray]]:
    """:func:`within_problem_metrics` of one embedding table ``[N, D]`` (all rows of the
    variants table) on every split of :func:`split_sets`: ``{split: {metric: [Q]}}``."""
    emb = torch.as_tensor(emb).float()
    return {s: within_problem_metrics(emb[q], emb[c], ps) for s, (q, c, ps) in sets.items()}
