"""Per-item metrics of code embeddings on the two splits, and the clustered-bootstrap table.

Split (a), *unseen submissions of seen problems*: queries = ``test_a`` rows, corpus =
``train`` rows. Split (b), *unseen problems*: queries = ``test_b`` rows, corpus = the other
``test_b`` rows (leave-one-out; no ``test_b`` problem was trained on). Validation (model
selection only): queries = ``val`` rows, corpus = ``train`` rows.

Per query (so that the bootstrap can resample queries by problem):

- ``knn{k}_problem`` / ``knn{k}_tier`` / ``knn{k}_pxt``: fraction of the ``k`` nearest
  corpus rows (cosine) with the same problem / tier / (problem, tier) -- kNN label purity;
- ``ap``: average precision of the corpus ranking with "same problem and same tier" as the
  relevant set (its mean over queries is the retrieval mAP); ``rank{k}``: 1 when a relevant
  row is among the top ``k`` (Rank@k / success@k). Queries without any relevant corpus row
  (a split-(b) cell of one variant) are left out of ``ap`` and ``rank{k}`` for every method
  (relevance depends on the labels only), and counted;
- ``probe_tier`` (split b): 1 when a multinomial logistic regression (L2, ``C = probe_c``;
  scikit-learn ``lbfgs``) fitted on the ``train`` + ``val`` rows' embeddings predicts the
  query's tier (linear-probe accuracy, Khosla et al. 2020 linear evaluation).

:func:`table` turns the per-item arrays of every method (``[S, I]``: seeds x queries) into
point estimates and CIs with :func:`contrastlab.evaluation.stats.bootstrap_per_item`
(queries resampled by problem: a cluster bootstrap; ``n - 1`` of ``n`` seeds and clusters)
and :func:`~contrastlab.evaluation.stats.summarize` (bias-corrected percentile intervals,
Model Confidence Set of the best, Holm-corrected tests against the strongest baseline).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError
from .train import knn_purity

__all__ = ["item_metrics", "average_precision_rows", "table", "BASELINES", "metric_names",
           "summarize_variants",
           "purity_ceiling"]

#: Baseline rows of the comparison (no fine-tuning or no neural encoder).
BASELINES = ("frozen", "head", "tfidf")


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


def metric_names(knn_k: Sequence[int], rank_k: Sequence[int], split: str) -> list[str]:
    names = [f"knn{k}_{w}" for k in knn_k for w in ("problem", "tier", "pxt")]
    if split != "val":
        names += ["ap", *[f"rank{k}" for k in rank_k]]
    if split == "b":
        names.append("probe_tier")
    return names


def _split_metrics(emb_c, emb_q, prob_c, prob_q, tier_c, tier_q, knn_k, rank_k, loo: bool) -> dict:
    pxt_c = np.array([f"{a}|{b}" for a, b in zip(prob_c, tier_c)], dtype=object)
    pxt_q = np.array([f"{a}|{b}" for a, b in zip(prob_q, tier_q)], dtype=object)
    out: dict[str, np.ndarray] = {}
    for k in knn_k:
        for name, kc, kq in (("problem", prob_c, prob_q), ("tier", tier_c, tier_q),
                             ("pxt", pxt_c, pxt_q)):
            out[f"knn{k}_{name}"] = knn_purity(emb_c, kc, emb_q, kq, k, exclude_self=loo)
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
    idx = {s: np.flatnonzero(split == s) for s in ("train", "val", "test_a", "test_b")}
    for s in ("train", "test_a", "test_b"):
        if not len(idx[s]):
            raise InputError(f"split {s!r} is empty")
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
        res["val"] = {k: vm[k] for k in vm if k.startswith("knn")}
    return res


def table(items: Mapping[str, np.ndarray], clusters, *, baseline: str | None,
          n_resamples: int = 1000, seed: int = 0) -> dict[str, dict]:
    """One metric's table over methods: CIs clustered by problem.

    Args:
        items: method -> ``[S, I]`` per-query scores (methods with one seed are repeated to
            the common ``S``; NaN columns -- queries without a relevant row -- are dropped for
            every method alike).
        clusters: ``[I]`` problem id per query.
        baseline: the strongest baseline (tested against, see
            :func:`contrastlab.evaluation.stats.summarize`); every method is a candidate.

    Returns:
        :func:`~contrastlab.evaluation.stats.summarize` output plus ``n_items`` per method.

    Raises:
        InputError: methods of different query counts.
    """
    from ..evaluation.stats import bootstrap_per_item, summarize

    arrs = {k: np.atleast_2d(np.asarray(v, dtype=np.float64)) for k, v in items.items()}
    s_max = max(a.shape[0] for a in arrs.values())
    n_items = {a.shape[1] for a in arrs.values()}
    if len(n_items) != 1:
        raise InputError(f"methods have different numbers of queries: {sorted(n_items)}")
    arrs = {k: (np.repeat(a, s_max, axis=0) if a.shape[0] == 1 else a) for k, a in arrs.items()}
    if len({a.shape[0] for a in arrs.values()}) != 1:
        raise InputError("methods have different numbers of seeds (and more than one)")
    keep = ~np.any([np.isnan(a).any(0) for a in arrs.values()], axis=0)
    arrs = {k: a[:, keep] for k, a in arrs.items()}
    cl = np.asarray(clusters, dtype=object)[keep].astype(str)
    point, reps = bootstrap_per_item(arrs, clusters=cl, n_resamples=n_resamples, seed=seed)
    out = summarize(point, reps, baseline=baseline, candidates=list(arrs))
    for k in out:
        out[k]["n_items"] = int(keep.sum())
    return out


def purity_ceiling(problems, tiers, split, k: int) -> dict[str, np.ndarray]:
    """The highest kNN@k problem x tier purity any embedding can reach, per query.

    A query whose (problem, tier) cell has ``n`` members in the corpus can have at most
    ``min(k, n)`` of its ``k`` neighbours in the cell: ceiling ``min(k, n) / k``. With at most
    nine variants per HumanEval problem, most cells are small, so the ceiling is well below 1.

    Returns:
        ``{"a": [Q_a], "b": [Q_b], "val": [Q_val]}`` float64 (corpora as in
        :func:`item_metrics`).
    """
    keys = np.array([f"{a}|{b}" for a, b in zip(problems, tiers)], dtype=object)
    split = np.asarray(split, dtype=object)
    out = {}
    train = {}
    for x in keys[split == "train"]:
        train[x] = train.get(x, 0) + 1
    for name, s in (("a", "test_a"), ("val", "val")):
        n = np.array([train.get(x, 0) for x in keys[split == s]], dtype=np.float64)
        out[name] = np.minimum(n, k) / k
    kb = keys[split == "test_b"]
    cnt = {x: int((kb == x).sum()) for x in set(kb)}
    out["b"] = np.minimum(np.array([cnt[x] - 1 for x in kb], dtype=np.float64), k) / k
    return out


def summarize_variants(ft, df, metrics_dir) -> dict:
    """The track's comparison (stage ``finetune_evaluate``): every variant's and baseline's
    per-query arrays (``<metrics_dir>/items/<v>.npz``) turned into one :func:`table` per
    split (a: unseen submissions of seen problems; b: unseen problems) and metric, with the
    strongest baseline chosen on validation kNN problem x tier purity and the purity ceiling
    the data allows.

    Args:
        ft: the ``finetune`` params section. df: the variants table (``variants.parquet``:
            ``id``, ``problem``, ``tier``, ``split``). metrics_dir: ``reports/metrics/finetune``.

    Returns:
        ``{"baseline", "ceiling", "baseline_rule", "validation", "variants", "tables"}``
        (``tables[split][metric][row]``: mean, CI, MCS, tests; fractions).

    Raises:
        contrastlab.errors.InputError: a variant's arrays are missing.
    """
    from pathlib import Path

    mdir = Path(metrics_dir)
    names = [*ft.variants, *BASELINES]
    items = {}
    for v in names:
        f = mdir / "items" / f"{v}.npz"
        if not f.exists():
            raise InputError(f"{f}: missing; run finetune_encoder@{v} first")
        with np.load(f) as z:
            items[v] = {k: z[k] for k in z.files if k != "seeds"}
    kmax = max(ft.eval.knn_k)
    val_key = f"val/knn{kmax}_pxt"
    val = {v: float(np.mean(items[v][val_key])) for v in names}
    baseline = max(BASELINES, key=lambda b: val[b])
    split = df["split"].to_numpy()
    clusters = {"a": df.loc[split == "test_a", "problem"].astype(str).to_numpy(),
                "b": df.loc[split == "test_b", "problem"].astype(str).to_numpy()}
    ceil = purity_ceiling(df["problem"].astype(str), df["tier"].astype(str), split, kmax)
    out = {"baseline": baseline, "ceiling": {f"knn{kmax}_pxt": {s: float(c.mean()) for s, c in ceil.items()}},
           "baseline_rule": f"best validation kNN@{kmax} problem x tier purity",
           "validation": val, "variants": names, "tables": {}}
    for s in ("a", "b"):
        metrics = sorted({k.split("/", 1)[1] for k in items[names[0]] if k.startswith(f"{s}/")})
        out["tables"][s] = {}
        for m in metrics:
            out["tables"][s][m] = table({v: items[v][f"{s}/{m}"] for v in names}, clusters[s],
                                        baseline=baseline, n_resamples=ft.eval.n_resamples, seed=0)
    return out
