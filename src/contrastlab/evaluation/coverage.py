"""Coverage of the project's bootstrap intervals, checked by simulation.

A 95% interval procedure is only as good as its coverage: over repeated samples from a
population whose value is known, the interval should contain that value about 95% of the
time. Each simulator below draws one synthetic data set shaped like a track's test data,
runs exactly the interval procedure the pipeline uses for that track, and reports whether
the interval covered the population value. :func:`coverage` repeats it.

- :func:`sim_accuracy`: graph node classification. Per-node difficulty ``p_i ~ Beta`` and a
  per-seed logit shift ``delta_s ~ N(0, tau^2)`` (training-seed noise); the population value
  is ``E[sigmoid(logit p + delta)]``. Procedure: two-level bootstrap over seeds and test
  nodes (:func:`contrastlab.evaluation.stats.bootstrap_per_item`) and
  :func:`contrastlab.evaluation.stats.bias_corrected_interval`.
- :func:`sim_clustered_hits`: retrieval Rank@k with queries clustered by repository: a
  cluster effect ``u_g ~ N(0, sigma^2)`` on the logit of the hit probability; procedure:
  cluster bootstrap (whole repository groups) over seeds and queries.
- :func:`sim_multilabel`: multi-label scores ``s = mu_s * y + N(0, 1)`` per label with a
  per-seed separation ``mu_s ~ N(mu, tau^2)``; the population mAP and F1 at a threshold
  follow from the two Gaussians by numerical integration (AP = integral of precision over
  recall, Davis & Goadrich, ICML 2006); procedure:
  :func:`contrastlab.evaluation.multilabel.stratified_metric_reps` and the same interval.

Sources: Efron & Tibshirani, "An Introduction to the Bootstrap" (1993), Ch. 12-14 on
coverage of bootstrap intervals; Field & Welsh, JRSS-B 2007, on bootstrapping clustered data.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np
from scipy.special import expit, logit
from scipy.stats import norm

from .multilabel import stratified_metric_reps
from .stats import bias_corrected_interval, bootstrap_per_item, resample_indices

__all__ = ["sim_accuracy", "sim_clustered_hits", "sim_multilabel", "coverage",
           "population_accuracy", "population_ap", "population_f1"]

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(40)  # E[f(Z)], Z ~ N(0,1)
_GH_W = _GH_W / _GH_W.sum()


@lru_cache(maxsize=32)
def population_accuracy(a: float, b: float, tau: float, n_mc: int = 400_000, seed: int = 12345) -> float:
    """``E[sigmoid(logit p + tau Z)]`` with ``p ~ Beta(a, b)``, ``Z ~ N(0, 1)`` (Monte Carlo over
    ``p``, Gauss-Hermite over ``Z``; error < 1e-3)."""
    p = np.clip(np.random.default_rng(seed).beta(a, b, n_mc), 1e-9, 1 - 1e-9)
    return float(sum(w * expit(logit(p) + tau * x).mean() for x, w in zip(_GH_X, _GH_W)))


def sim_accuracy(rng: np.random.Generator, *, n_items: int = 1000, n_seeds: int = 10,
                 a: float = 8.0, b: float = 2.0, tau: float = 0.15, n_resamples: int = 1000,
                 truth: float | None = None) -> tuple[float, float, float, float]:
    """One replication: ``(truth, estimate, low, high)`` of the graph-accuracy procedure."""
    truth = population_accuracy(a, b, tau) if truth is None else truth
    p = np.clip(rng.beta(a, b, n_items), 1e-9, 1 - 1e-9)
    delta = rng.normal(0, tau, n_seeds)
    correct = (rng.random((n_seeds, n_items)) < expit(logit(p)[None] + delta[:, None])).astype(float)
    point, reps = bootstrap_per_item({"m": correct}, n_resamples=n_resamples,
                                     seed=int(rng.integers(2**31)))
    lo, hi = bias_corrected_interval(point["m"], reps["m"])
    return truth, point["m"], lo, hi


def sim_clustered_hits(rng: np.random.Generator, *, n_clusters: int = 39, mean_size: int = 38,
                       n_seeds: int = 3, base: float = 0.45, sigma: float = 0.8, tau: float = 0.1,
                       n_resamples: int = 1000, truth: float | None = None
                       ) -> tuple[float, float, float, float]:
    """One replication of the clustered Rank@k procedure: ``(truth, estimate, low, high)``.

    Cluster sizes are Poisson(mean_size) + 1; a query of cluster ``g`` under seed ``s`` is a
    hit with probability ``sigmoid(logit(base) + u_g + delta_s)``. The population value is
    the query-weighted expectation, ``E[sigmoid(logit(base) + sigma Z1 + tau Z2)]`` (cluster
    size is independent of ``u_g``).
    """
    if truth is None:
        truth = float(sum(w1 * w2 * expit(logit(base) + sigma * x1 + tau * x2)
                          for x1, w1 in zip(_GH_X, _GH_W) for x2, w2 in zip(_GH_X, _GH_W)))
    sizes = rng.poisson(mean_size, n_clusters) + 1
    g = np.repeat(np.arange(n_clusters), sizes)
    u = rng.normal(0, sigma, n_clusters)
    delta = rng.normal(0, tau, n_seeds)
    prob = expit(logit(base) + u[g][None] + delta[:, None])
    hits = (rng.random(prob.shape) < prob).astype(float)
    draws = resample_indices(n_seeds, g.size, clusters=g, n_resamples=n_resamples,
                             seed=int(rng.integers(2**31)))
    point, reps = bootstrap_per_item({"m": hits}, draws=draws)
    lo, hi = bias_corrected_interval(point["m"], reps["m"])
    return truth, point["m"], lo, hi


def population_ap(prevalence: float, mu: float) -> float:
    """Population average precision of scores ``N(mu, 1)`` (positives) vs ``N(0, 1)``
    (negatives) at prevalence ``pi``: ``int_0^1 precision d recall`` with
    ``precision(t) = pi TPR / (pi TPR + (1 - pi) FPR)`` (numerical integration)."""
    t = np.linspace(mu + 9, -9, 40001)
    tpr, fpr = norm.sf(t - mu), norm.sf(t)
    prec = prevalence * tpr / np.maximum(prevalence * tpr + (1 - prevalence) * fpr, 1e-300)
    return float(np.sum(0.5 * (prec[1:] + prec[:-1]) * np.diff(tpr)))


def population_f1(prevalence: np.ndarray, mu: np.ndarray, threshold: float) -> tuple[float, float]:
    """Population (micro-F1, macro-F1) at a score threshold for per-label prevalences and
    separations (expected TP/FP/FN rates per row)."""
    tp = prevalence * norm.sf(threshold - mu)
    fp = (1 - prevalence) * norm.sf(threshold)
    fn = prevalence - tp
    micro = 2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum())
    macro = float(np.mean(2 * tp / (2 * tp + fp + fn)))
    return float(micro), macro


@lru_cache(maxsize=32)
def _ml_truth(prevalence: tuple[float, ...], mu: float, tau: float, threshold: float) -> dict[str, float]:
    prev = np.asarray(prevalence, dtype=np.float64)
    ap = micro = macro = 0.0
    for x, w in zip(_GH_X, _GH_W):
        m = mu + tau * x
        ap += w * np.mean([population_ap(p, m) for p in prev])
        mi, ma = population_f1(prev, np.full(prev.size, m), threshold)
        micro += w * mi
        macro += w * ma
    return {"map": float(ap), "micro_f1": float(micro), "macro_f1": float(macro)}


def sim_multilabel(rng: np.random.Generator, *, n_items: int = 600, n_seeds: int = 3,
                   prevalence: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.4), mu: float = 1.5,
                   tau: float = 0.1, threshold: float = 1.0, n_resamples: int = 500,
                   truth: dict[str, float] | None = None) -> dict[str, tuple[float, float, float, float]]:
    """One replication of the multi-label procedure: metric -> ``(truth, estimate, low, high)``
    for ``map``, ``micro_f1`` and ``macro_f1`` (labels independent; per-seed separation
    ``mu_s ~ N(mu, tau^2)`` shared by the labels of a seed)."""
    prev = np.asarray(prevalence, dtype=np.float64)
    truth = _ml_truth(tuple(prevalence), mu, tau, threshold) if truth is None else truth
    y = (rng.random((n_items, prev.size)) < prev).astype(np.int64)
    mus = rng.normal(mu, tau, n_seeds)
    scores = mus[:, None, None] * y[None] + rng.normal(0, 1, (n_seeds, n_items, prev.size))
    from .multilabel import multilabel_metrics

    pts = {"map": [], "micro_f1": [], "macro_f1": []}
    for j in range(n_seeds):
        m = multilabel_metrics(y, scores[j], threshold=threshold)
        for k in pts:
            pts[k].append(m[k])
    reps = stratified_metric_reps(y, scores, np.full(n_seeds, threshold), n_resamples=n_resamples,
                                  seed=int(rng.integers(2**31)), threshold=threshold)
    out = {}
    for k in pts:
        est = float(np.mean(pts[k]))
        lo, hi = bias_corrected_interval(est, reps[k])
        out[k] = (truth[k], est, lo, hi)
    return out


def coverage(sim: Callable[..., object], n_rep: int, seed: int = 0, **kw) -> dict[str, float]:
    """Fraction of ``n_rep`` replications of ``sim`` whose interval covers the truth, per
    metric (``"value"`` for single-metric simulators), plus the mean interval width and the
    fraction of intervals containing their own estimate."""
    rng = np.random.default_rng(seed)
    hits: dict[str, list[tuple[bool, float, bool]]] = {}
    for _ in range(n_rep):
        res = sim(rng, **kw)
        items = res.items() if isinstance(res, dict) else [("value", res)]
        for k, (truth, est, lo, hi) in items:
            hits.setdefault(k, []).append((lo <= truth <= hi, hi - lo, lo <= est <= hi))
    return {f"{k}.{name}": float(np.mean([h[i] for h in v]))
            for k, v in hits.items() for i, name in enumerate(("coverage", "width", "contains_estimate"))}
