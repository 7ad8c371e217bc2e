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
from .metrics import BASELINES, average_precision_rows, item_metrics, metric_names  # noqa: F401 (re-exported)

__all__ = ["item_metrics", "average_precision_rows", "table", "BASELINES", "metric_names",
           "summarize_variants",
           "purity_ceiling"]


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
