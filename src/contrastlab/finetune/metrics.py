"""Per-query metrics of code embeddings on the two splits (computed by ``finetune_encoder``).

Split (a): queries ``test_a``, corpus ``train``; split (b): queries ``test_b``, corpus the
other ``test_b`` rows (leave-one-out); validation: queries ``val``, corpus ``train``.

- ``knn{k}_problem`` / ``knn{k}_tier`` / ``knn{k}_pxt``: kNN label purity (cosine);
- ``ap`` and ``rank{k}``: average precision / Rank@k with "same problem and tier" relevant;
  queries without a relevant corpus row are left out for every method, and counted;
- ``probe_tier`` (split b): logistic-regression linear probe on ``train`` + ``val``
  (L2, ``C = probe_c``, ``lbfgs``; Khosla et al. 2020).

Kept apart from :mod:`.train` and :mod:`.evaluate` so neither imports the other.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError
from ..params.finetune import REFERENCE_ROWS

__all__ = ["item_metrics", "average_precision_rows", "knn_purity", "split_rows", "BASELINES"]


#: Reference rows of the comparison (no fine-tuning or no neural encoder): the fine-tuning
#: rows of the variant table fitted by a ``method`` of their own, in table order.
BASELINES = REFERENCE_ROWS


def average_precision_rows(sim: torch.Tensor, relevant: np.ndarray, ks: Sequence[int]
                           ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """AP and hit@k per query from a similarity matrix.

    Args:
        sim: ``[Q, N]`` similarities (higher = closer; ``-inf`` = excluded candidate).
        relevant: bool ``[Q, N]``.
        ks: cut-offs of Rank@k.

    Returns:
        ``(ap [Q], {k: hit [Q]})`` float64; NaN for a query with no relevant row.
    """
    order = torch.argsort(sim, dim=1, descending=True).numpy()
    rel = np.take_along_axis(relevant, order, axis=1)
    n_rel = rel.sum(1)
    hits = np.cumsum(rel, axis=1)
    ranks = np.arange(1, rel.shape[1] + 1)
    ap = np.where(n_rel > 0, (rel * hits / ranks).sum(1) / np.maximum(n_rel, 1), np.nan)
    out = {k: np.where(n_rel > 0, rel[:, :k].any(1).astype(np.float64), np.nan) for k in ks}
    return ap.astype(np.float64), out


def split_rows(split: np.ndarray) -> dict[str, np.ndarray]:
    """Row indices of each split name (``train``/``val``/``test_a``/``test_b``).

    Raises:
        InputError: ``train``, ``test_a`` or ``test_b`` is empty.
    """
    idx = {s: np.flatnonzero(split == s) for s in ("train", "val", "test_a", "test_b")}
    for s in ("train", "test_a", "test_b"):
        if not len(idx[s]):
            raise InputError(f"split {s!r} is empty")
    return idx


def _split_metrics(emb_c, emb_q, prob_c, prob_q, tier_c, tier_q, knn_k, rank_k, loo: bool) -> dict:
    pxt_c = np.array([f"{a}|{b}" for a, b in zip(prob_c, tier_c)], dtype=object)
    pxt_q = np.array([f"{a}|{b}" for a, b in zip(prob_q, tier_q)], dtype=object)
    out: dict[str, np.ndarray] = {}
    for k in knn_k:
        for name, kc, kq in (("problem", prob_c, prob_q), ("tier", tier_c, tier_q),
                             ("pxt", pxt_c, pxt_q)):
            out[f"knn{k}_{name}"] = knn_purity(emb_c, kc, emb_q, kq, k, exclude_self=loo)  # not a row name (metric)
    c = F.normalize(emb_c.float(), dim=1)
    q = F.normalize(emb_q.float(), dim=1)
    sim = q @ c.T
    rel = pxt_q[:, None] == pxt_c[None, :]
    if loo:
        sim.fill_diagonal_(-float("inf"))
        np.fill_diagonal(rel, False)
    ap, hit = average_precision_rows(sim, rel, rank_k)
    out["ap"] = ap
    for k in rank_k:
        out[f"rank{k}"] = hit[k]
    return out


def item_metrics(emb: torch.Tensor, problems, tiers, split, *, knn_k: Sequence[int] = (1, 5),
                 rank_k: Sequence[int] = (1, 5, 10), probe_c: float = 1.0,
                 with_val: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Per-query metrics of one embedding table on the splits (module docstring).

    Args:
        emb: ``[N, D]`` embeddings of every row (dense float; rows are L2-normalised here).
        problems, tiers, split: ``[N]`` labels and split names (``train``/``val``/``test_a``/
            ``test_b``).
        knn_k, rank_k, probe_c: see the module docstring.
        with_val: also compute the validation metrics (``val`` key).

    Returns:
        ``{"a": {metric: [Q_a]}, "b": {metric: [Q_b]}, "val": {metric: [Q_val]}}`` float64
        (NaN where a query has no relevant row, see the module docstring).

    Raises:
        InputError: shapes disagree or a split is empty.
    """
    from sklearn.linear_model import LogisticRegression

    emb = torch.as_tensor(emb).float()
    problems = np.asarray(problems, dtype=object)
    tiers = np.asarray(tiers, dtype=object)
    split = np.asarray(split, dtype=object)
    if not (len(emb) == len(problems) == len(tiers) == len(split)):
        raise InputError(f"emb {tuple(emb.shape)} and labels ({len(problems)}, {len(tiers)}, "
                         f"{len(split)}) differ in length")
    idx = split_rows(split)
    tr = idx["train"]
    res = {"a": _split_metrics(emb[tr], emb[idx["test_a"]], problems[tr], problems[idx["test_a"]],
                               tiers[tr], tiers[idx["test_a"]], knn_k, rank_k, loo=False)}
    b = idx["test_b"]
    res["b"] = _split_metrics(emb[b], emb[b], problems[b], problems[b], tiers[b], tiers[b],
                              knn_k, rank_k, loo=True)
    fit = np.concatenate([tr, idx["val"]])
    x = F.normalize(emb, dim=1).numpy().astype(np.float64)
    clf = LogisticRegression(C=probe_c, max_iter=2000)
    clf.fit(x[fit], tiers[fit].astype(str))
    res["b"]["probe_tier"] = (clf.predict(x[b]) == tiers[b].astype(str)).astype(np.float64)
    if with_val and len(idx["val"]):
        v = idx["val"]
        vm = _split_metrics(emb[tr], emb[v], problems[tr], problems[v], tiers[tr], tiers[v],
                            knn_k, rank_k, loo=False)
        res["val"] = {k: vm[k] for k in vm if k.startswith("knn")}  # not a row name (metric)
    return res


def knn_purity(corpus: torch.Tensor, corpus_keys, queries: torch.Tensor, query_keys, k: int,
               exclude_self: bool = False) -> np.ndarray:
    """Per query, the fraction of its ``k`` nearest corpus rows (cosine) with the same key.

    Args:
        corpus: ``[N, D]``; queries: ``[Q, D]`` (any scale; rows are L2-normalised here).
        corpus_keys, query_keys: ``[N]`` / ``[Q]`` hashable keys (e.g. ``"problem|tier"``).
        k: neighbours (``<= N`` minus one when ``exclude_self``).
        exclude_self: queries are the corpus itself (same order); a row is not its own
            neighbour.

    Returns:
        float64 ``[Q]`` in ``[0, 1]``.

    Raises:
        InputError: ``k`` larger than the corpus allows.
    """
    c = F.normalize(corpus.float(), dim=1)
    q = F.normalize(queries.float(), dim=1)
    n = c.shape[0] - (1 if exclude_self else 0)
    if not 1 <= k <= n:
        raise InputError(f"k={k} but the corpus has {n} candidate rows")
    sim = q @ c.T
    if exclude_self:
        sim.fill_diagonal_(-float("inf"))
    nn_idx = sim.topk(k, dim=1).indices.numpy()
    ck = np.asarray(corpus_keys, dtype=object)
    qk = np.asarray(query_keys, dtype=object)
    return (ck[nn_idx] == qk[:, None]).mean(1).astype(np.float64)
