"""Coverage of the project's bootstrap intervals, checked by simulation at each data set's shape.

Each simulator draws one synthetic test set shaped like a real one (size, clusters, label
prevalences, seeds) from a population whose value is known, runs the interval procedure the
report uses for it (the bootstrap of :mod:`contrastlab.evaluation.stats`, BC percentile
interval) and says whether the interval covered the value; :func:`coverage` repeats it.

- :func:`sim_accuracy`: graph node classification; node difficulty ``p_i ~ Beta(a, b)``, seed
  logit shift ``delta_s ~ N(0, tau^2)``; two-level bootstrap over seeds and nodes.
- :func:`sim_clustered`: a mean of per-query values with queries clustered (repository groups,
  HumanEval problems): ``eta = link + u_g + delta_s + e_i``; cluster bootstrap.
- :func:`sim_multilabel`: binormal scores per label at the real prevalences; population AP
  and F1 by numerical integration (Davis & Goadrich, ICML 2006); the stratified bootstrap of
  :func:`contrastlab.evaluation.multilabel.stratified_metric_reps` (fast form:
  :func:`stratified_reps_fast`, compared in ``tests/protocol/test_coverage.py``).

The multi-label and fine-tuning simulations use the crossed-effects replicates of
:mod:`contrastlab.evaluation.stats_crossed` (``crossed=True``), as their tables do. Sources:
Efron & Tibshirani (1993), Ch. 12-14; Field & Welsh, JRSS-B 2007 (clustered data).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from scipy.special import expit, logit
from scipy.stats import norm

from .stats import bias_corrected_interval, bootstrap_per_item, resample_counts
from .stats_crossed import bootstrap_per_item_crossed, crossed_reps

__all__ = ["sim_accuracy", "sim_clustered", "sim_multilabel", "stratified_reps_fast", "coverage",
           "population_accuracy", "population_ap", "population_f1", "population_clustered",
           "calibrate_mu", "calibrate_operating_point", "sim_f1_operating_point", "row_reps"]

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(40)  # E[f(Z)], Z ~ N(0,1)
_GH_W = _GH_W / _GH_W.sum()
Result = tuple[float, float, float, float]  # (truth, estimate, low, high)


@lru_cache(maxsize=32)
def population_accuracy(a: float, b: float, tau: float, n_mc: int = 400_000, seed: int = 12345) -> float:
    """``E[sigmoid(logit p + tau Z)]`` with ``p ~ Beta(a, b)``, ``Z ~ N(0, 1)`` (Monte Carlo over
    ``p``, Gauss-Hermite over ``Z``; error < 1e-3)."""
    p = np.clip(np.random.default_rng(seed).beta(a, b, n_mc), 1e-9, 1 - 1e-9)
    return float(sum(w * expit(logit(p) + tau * x).mean() for x, w in zip(_GH_X, _GH_W)))


def sim_accuracy(rng: np.random.Generator, *, n_items: int = 1000, n_seeds: int = 10,
                 a: float = 8.0, b: float = 2.0, tau: float = 0.15, n_resamples: int = 1000,
                 truth: float | None = None) -> Result:
    """One replication of the graph-accuracy procedure: ``(truth, estimate, low, high)``."""
    truth = population_accuracy(a, b, tau) if truth is None else truth
    p = np.clip(rng.beta(a, b, n_items), 1e-9, 1 - 1e-9)
    delta = rng.normal(0, tau, n_seeds)
    correct = (rng.random((n_seeds, n_items)) < expit(logit(p)[None] + delta[:, None])).astype(float)
    point, reps = bootstrap_per_item({"m": correct}, n_resamples=n_resamples,
                                     seed=int(rng.integers(2**31)))
    lo, hi = bias_corrected_interval(point["m"], reps["m"])
    return truth, point["m"], lo, hi


@lru_cache(maxsize=64)
def population_clustered(link: float, sd: float) -> float:
    """``E[sigmoid(link + sd Z)]``, ``Z ~ N(0, 1)`` (Gauss-Hermite, 40 nodes)."""
    return float(np.sum(_GH_W * expit(link + sd * _GH_X)))


def sim_clustered(rng: np.random.Generator, *, sizes: Sequence[int], n_seeds: int = 3,
                  link: float = 0.0, sigma: float = 0.8, tau: float = 0.1, sd_item: float = 0.0,
                  binary: bool = True, n_resamples: int = 1000, crossed: bool = False) -> Result:
    """One replication of a clustered per-query mean (Rank@k, MRR, purity) at given cluster
    sizes: ``(truth, estimate, low, high)``. Clusters are drawn anew (``u_g ~ N(0, sigma^2)``),
    sizes fixed; the value is Bernoulli(sigmoid(eta)) (``binary``) or sigmoid(eta), the truth
    ``E[sigmoid(link + N(0, sigma^2 + tau^2 + sd_item^2))]`` (Gauss-Hermite).
    ``crossed``: the replicates of
    :func:`~contrastlab.evaluation.stats_crossed.bootstrap_per_item_crossed` (the fine-tuning
    tables) instead of the plain two-level bootstrap (the code tables)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    g = np.repeat(np.arange(sizes.size), sizes)
    eta = (link + rng.normal(0, sigma, sizes.size)[g][None] + rng.normal(0, tau, n_seeds)[:, None]
           + rng.normal(0, sd_item, (1, g.size)))
    prob = expit(eta)
    x = (rng.random(prob.shape) < prob).astype(float) if binary else prob
    draws = resample_counts(n_seeds, g.size, clusters=g, n_resamples=n_resamples,
                            seed=int(rng.integers(2**31)))
    point, reps = (bootstrap_per_item_crossed if crossed else bootstrap_per_item)({"m": x}, draws=draws)
    lo, hi = bias_corrected_interval(point["m"], reps["m"])
    truth = population_clustered(float(link), float(np.sqrt(sigma**2 + tau**2 + sd_item**2)))
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


@lru_cache(maxsize=64)
def _ml_truth(prevalence: tuple[float, ...], mu: float, tau: float,
              thresholds: tuple[float, ...]) -> tuple[np.ndarray, dict[str, float]]:
    """Per-label population AP (averaged over ``mu_s ~ N(mu, tau^2)``) and the F1 values."""
    prev = np.asarray(prevalence, dtype=np.float64)
    ap = np.zeros(prev.size)
    f1 = {}
    for x, w in zip(_GH_X[10:30], _GH_W[10:30] / _GH_W[10:30].sum()):  # |x| < 4.5: enough
        m = mu + tau * x
        ap += w * np.array([population_ap(p, m) for p in prev])
        for j, t in enumerate(thresholds):
            mi, ma = population_f1(prev, np.full(prev.size, m), t)
            sfx = "" if j == 0 else "_t2"
            f1["micro_f1" + sfx] = f1.get("micro_f1" + sfx, 0.0) + w * mi
            f1["macro_f1" + sfx] = f1.get("macro_f1" + sfx, 0.0) + w * ma
    return ap, f1


def calibrate_mu(prevalence: Sequence[float], target_map: float) -> float:
    """The separation ``mu`` whose population mAP at these prevalences is ``target_map``
    (bisection on [0, 8]), so a simulated data set is as hard as the real one."""
    prev = tuple(float(p) for p in prevalence)
    lo, hi = 0.0, 8.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if np.mean([population_ap(p, mid) for p in prev]) < target_map:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def stratified_reps_fast(y: np.ndarray, scores: np.ndarray, thresholds: Sequence[float], *,
                         n_resamples: int, rng: np.random.Generator,
                         min_pos: Sequence[int] = (1,),
                         seed_points: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The stratified bootstrap of ``stratified_metric_reps`` (same law: seeds n-1 of n; per
    label the number of positives ``max(1, Binomial(N, n_pos / N))``, positive and negative rows
    resampled with replacement within their class), written per label from the positives'
    ranks so a simulation at tmc2007-500's size (7077 rows) stays cheap.

    Args:
        y: {0,1} ``[N, C]`` test labels; scores: ``[S, N, C]``; thresholds: F1 thresholds (the
            first gives ``micro_f1``/``macro_f1``, the second ``..._t2``), ``[T]`` or per seed
            ``[S, T]``.
        min_pos: for each ``k``, ``map_k<k>``: the mean AP over labels with at least ``k``
            positives in the test split (``k = 1`` is ``map``).
        seed_points: metric -> ``[S]``, each seed's value on the test set itself (what
            :func:`~contrastlab.evaluation.stats_crossed.crossed_reps` needs); a metric
            without one gets the plain mean over the drawn seeds (the earlier law).

    Returns:
        metric -> ``[R]`` replicates.
    """
    n_s, n, n_c = scores.shape
    R = n_resamples
    seed_idx = rng.integers(0, n_s, (R, max(1, n_s - 1)))
    npos_all = y.sum(0)
    per = {f"map_k{k}": np.zeros((R, n_s)) for k in min_pos}
    f1 = {}
    for j, _ in enumerate(thresholds):
        sfx = "" if j == 0 else "_t2"
        f1[sfx] = [np.zeros((R, n_s)) for _ in range(4)]  # tp, fp, fn, sum of per-label F1
    thr = np.asarray(thresholds, dtype=np.float64)
    thr = np.broadcast_to(thr, (n_s, thr.shape[-1])) if thr.ndim < 2 else thr  # [S, T]: per seed
    rows = np.arange(R)[:, None]
    for c in range(n_c):
        pos, neg = np.flatnonzero(y[:, c]), np.flatnonzero(y[:, c] == 0)
        if pos.size == 0:  # out of mAP; its false positives still count in micro-F1
            k_pos = np.zeros(R, dtype=np.int64)
        else:
            k_pos = np.maximum(1, rng.binomial(n, pos.size / n, R)) if neg.size else np.full(R, n)
        wp = _counts(rng, pos.size, k_pos)
        # negatives: the drawn rows themselves (no [R, N] count matrix); per seed only the
        # number of drawn negatives between consecutive cut points (the positives' scores and
        # the thresholds) matters, for AP and for false positives alike
        k_neg = n - k_pos
        kmax = int(k_neg.max()) if neg.size else 0
        picks = rng.integers(0, max(neg.size, 1), (R, kmax))
        keep = np.arange(kmax)[None] < k_neg[:, None]
        for s in range(n_s):
            sp, sn = scores[s, pos, c], scores[s, neg, c]
            cuts = np.concatenate([sp, thr[s]])
            order = np.argsort(-cuts, kind="stable")
            rank = np.empty(cuts.size, dtype=np.int64)
            rank[order] = np.arange(cuts.size)
            nb = cuts.size + 1
            if kmax:
                b_of = np.searchsorted(-cuts[order], -sn, side="left")  # cuts above each negative
                flat = (rows * nb + b_of[picks])[keep]
                cum_b = np.cumsum(np.bincount(flat, minlength=R * nb).reshape(R, nb), 1)
            else:
                cum_b = np.zeros((R, nb))
            for j, t in enumerate(thr[s]):
                tp = wp @ (sp >= t).astype(np.float64)
                fp = cum_b[:, rank[sp.size + j]]                     # drawn negatives above t
                fn = k_pos - tp
                acc = f1["" if j == 0 else "_t2"]
                acc[0][:, s] += tp
                acc[1][:, s] += fp
                acc[2][:, s] += fn
                acc[3][:, s] += 2 * tp / np.maximum(2 * tp + fp + fn, 1e-12)
            if pos.size == 0 or not min_pos:
                continue
            op = np.argsort(-sp, kind="stable")
            wpo = wp[:, op]
            cum_p = np.cumsum(wpo, 1)                                  # [R, P]
            cum_n = cum_b[:, rank[op]]                                 # drawn negatives above
            ap = (wpo * cum_p / np.maximum(cum_p + cum_n, 1e-12)).sum(1) / k_pos
            for k in min_pos:
                if pos.size >= k:
                    per[f"map_k{k}"][:, s] += ap
    out = {}
    for k in min_pos:
        m = int((npos_all >= k).sum())
        out[f"map_k{k}"] = per[f"map_k{k}"] / max(m, 1)
    for sfx, (tp, fp, fn, fs) in f1.items():
        out["micro_f1" + sfx] = 2 * tp / np.maximum(2 * tp + fp + fn, 1e-12)
        out["macro_f1" + sfx] = fs / n_c
    pts = seed_points or {}
    return {k: (crossed_reps(v, pts[k], seed_idx)[0] if k in pts else v[rows, seed_idx].mean(1))
            for k, v in out.items()}


def _counts(rng: np.random.Generator, size: int, k: np.ndarray) -> np.ndarray:
    """``[R, size]`` multiplicities of ``k[r]`` uniform draws with replacement from ``size``."""
    R, kmax = k.size, int(k.max()) if k.size else 0
    if kmax == 0 or size == 0:
        return np.zeros((R, size))
    pick = rng.integers(0, size, (R, kmax))
    keep = np.arange(kmax)[None] < k[:, None]
    flat = (np.arange(R)[:, None] * size + pick)[keep]
    return np.bincount(flat, minlength=R * size).reshape(R, size).astype(np.float64)


def _ap(y: np.ndarray, s: np.ndarray) -> float:
    """Average precision of one label (sklearn's step-wise definition, no ties)."""
    o = np.argsort(-s, kind="stable")
    yo = y[o]
    prec = np.cumsum(yo) / np.arange(1, yo.size + 1)
    return float((prec * yo).sum() / max(yo.sum(), 1))


def sim_multilabel(rng: np.random.Generator, *, n_items: int = 600, n_seeds: int = 5,
                   prevalence: Sequence[float] = (0.05, 0.1, 0.2, 0.3, 0.4), mu: float = 1.5,
                   tau: float = 0.1, thresholds: Sequence[float] = (1.0, 0.5),
                   min_pos: Sequence[int] = (1,), n_resamples: int = 400,
                   crossed: bool = True, rho: float = 0.0) -> dict[str, Result]:
    """One replication of the multi-label procedure at a data set's shape: metric ->
    ``(truth, estimate, low, high)`` for ``map_k<k>`` (mean AP over labels with >= k test
    positives; its truth is the population AP of those labels), ``micro_f1``, ``macro_f1``
    and, for a second threshold, ``micro_f1_t2``, ``macro_f1_t2``. Labels independent.
    ``crossed``: the pipeline's replicates (the interaction counted once,
    :mod:`contrastlab.evaluation.stats_crossed`); False gives the plain two-level law.
    ``rho`` in [0, 1]: the share of a score's unit noise that the seeds share (a row effect;
    the rest is drawn per seed), the real models' value from
    :func:`contrastlab.evaluation.multilabel.seed_score_correlation`; each seed's scores keep
    the law ``N(mu_s y, 1)``, so the population values do not depend on it."""
    prev = np.asarray(prevalence, dtype=np.float64)
    ap_true, f1_true = _ml_truth(tuple(prev.tolist()), float(mu), float(tau), tuple(thresholds))
    y = (rng.random((n_items, prev.size)) < prev).astype(np.int64)
    mus = rng.normal(mu, tau, n_seeds)
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must be in [0, 1] (got {rho})")
    scores = (mus[:, None, None] * y[None] + np.sqrt(rho) * rng.normal(0, 1, (1, n_items, prev.size))
              + np.sqrt(1.0 - rho) * rng.normal(0, 1, (n_seeds, n_items, prev.size)))
    npos = y.sum(0)
    est: dict[str, float] = {}
    per_seed: dict[str, np.ndarray] = {}
    aps = np.array([[_ap(y[:, c], scores[s, :, c]) if npos[c] else np.nan for c in range(prev.size)]
                    for s in range(n_seeds)])
    truth: dict[str, float] = {}
    for k in min_pos:
        sel = npos >= max(k, 1)
        if not sel.any():
            continue
        per_seed[f"map_k{k}"] = aps[:, sel].mean(1)
        est[f"map_k{k}"] = float(aps[:, sel].mean())
        truth[f"map_k{k}"] = float(ap_true[sel].mean())
    for j, t in enumerate(thresholds):
        sfx = "" if j == 0 else "_t2"
        pred = scores >= t
        tp = (pred & (y[None] == 1)).sum(1).astype(float)
        fp = (pred & (y[None] == 0)).sum(1).astype(float)
        fn = npos[None] - tp
        per_seed["micro_f1" + sfx] = 2 * tp.sum(1) / np.maximum(2 * tp.sum(1) + fp.sum(1) + fn.sum(1), 1)
        per_seed["macro_f1" + sfx] = (2 * tp / np.maximum(2 * tp + fp + fn, 1e-12)).mean(1)
    est.update({k: float(v.mean()) for k, v in per_seed.items()})
    truth.update(f1_true)
    reps = stratified_reps_fast(y, scores, thresholds, n_resamples=n_resamples, rng=rng,
                                min_pos=[k for k in min_pos if f"map_k{k}" in est],
                                seed_points=per_seed if crossed else None)
    out = {}
    for key, e in est.items():
        lo, hi = bias_corrected_interval(e, reps[key])
        out[key] = (truth[key], e, lo, hi)
    return out


def row_reps(y: np.ndarray, scores: np.ndarray, thresholds: np.ndarray, *, n_resamples: int,
             rng: np.random.Generator, seed_points: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Replicates of micro-/macro-F1 under **whole-row** resampling (all labels of a drawn row
    together, so the labels' shared-row correlation is kept), seeds n-1 of n, crossed
    (:func:`~contrastlab.evaluation.stats_crossed.crossed_reps`). ``thresholds``: ``[S, T]``;
    keys as :func:`stratified_reps_fast` (``micro_f1``, ``macro_f1``, ``..._t2``)."""
    n_s, n, _ = scores.shape
    w = _counts(rng, n, np.full(n_resamples, n))                     # [R, N] row multiplicities
    seed_idx = rng.integers(0, n_s, (n_resamples, max(1, n_s - 1)))
    yf = y.astype(np.float64)
    out = {}
    for j in range(thresholds.shape[1]):
        sfx = "" if j == 0 else "_t2"
        mi, ma = np.zeros((n_resamples, n_s)), np.zeros((n_resamples, n_s))
        for s in range(n_s):
            pred = (scores[s] >= thresholds[s, j]).astype(np.float64)
            tp, fp = w @ (yf * pred), w @ ((1 - yf) * pred)
            den = 2 * tp + fp + (w @ yf - tp)
            mi[:, s] = 2 * tp.sum(1) / np.maximum(den.sum(1), 1e-12)
            ma[:, s] = (2 * tp / np.maximum(den, 1e-12)).mean(1)
        for k, v in (("micro_f1" + sfx, mi), ("macro_f1" + sfx, ma)):
            out[k] = crossed_reps(v, seed_points[k], seed_idx)[0]
    return out


def _op_f1(prev: np.ndarray, mu: np.ndarray, t: float) -> np.ndarray:
    return np.array(population_f1(prev, mu, t))


def calibrate_operating_point(prevalence: Sequence[float], *, micro_val_t: float, macro_val_t: float,
                              micro_fixed: float, threshold_val: float) -> dict:
    """The operating point of a set's real rows in the binormal model: per-label separation
    ``mu_c = a + b z_c`` (``z``: standardised log prevalence; rarer labels learnt worse when
    ``b > 0``) whose population micro- and macro-F1 at the threshold ``t_opt`` that maximises
    their mean (the pipeline's rule, :func:`~contrastlab.evaluation.multilabel.choose_threshold`,
    in the population) equal the real median row's ``micro_val_t`` / ``macro_val_t``; the fixed
    threshold ``t_fixed`` (the pipeline's 0.5) where the population micro-F1 is the real
    ``micro_fixed``, on the side of ``t_opt`` where 0.5 lies from the real ``threshold_val``;
    and the pipeline's grid (0.05..0.95) in score units, ``t_fixed + logit(grid) / slope``, its
    slope putting ``threshold_val`` at ``t_opt``. ``b`` on a grid over [-3, 3], the rest by bisection; a target out of reach
    is met as closely as the model allows (the simulated values are recorded beside the real)."""
    from .multilabel import THRESHOLD_GRID

    prev = np.asarray(prevalence, dtype=np.float64)
    z = np.log(prev)
    z = (z - z.mean()) / (z.std() or 1.0)
    ts = np.linspace(-3.0, 9.0, 481)

    def at_opt(a: float, b: float) -> tuple[float, np.ndarray]:
        f = np.array([_op_f1(prev, a + b * z, t) for t in ts])
        j = int(np.argmax(f.sum(1)))
        return float(ts[j]), f[j]

    def a_for(b: float) -> float:
        lo, hi = -3.0, 8.0
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if at_opt(mid, b)[1][0] < micro_val_t else (lo, mid)
        return (lo + hi) / 2

    # b on a grid (macro-F1 at a matched micro-F1 need not be monotone in b), a by bisection
    bs = np.linspace(-3.0, 3.0, 25) if prev.size > 1 and np.ptp(z) > 0 else np.zeros(1)
    b = float(min(bs, key=lambda b: abs(at_opt(a_for(b), b)[1][1] - macro_val_t)))
    a = a_for(b)
    mu = a + b * z
    t_opt, f_opt = at_opt(a, b)
    side = 1.0 if threshold_val < 0.5 else -1.0
    lo, hi = t_opt, t_opt + side * 6.0
    for _ in range(40):  # micro-F1 falls moving away from t_opt
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _op_f1(prev, mu, mid)[0] > micro_fixed else (lo, mid)
    t_fixed = (lo + hi) / 2
    gap = t_opt - t_fixed
    slope = float(np.clip(logit(threshold_val) / gap, 0.25, 4.0)) if abs(gap) > 1e-6 else 1.0
    return {"mu": mu, "a": a, "b": b, "t_opt": t_opt, "t_fixed": t_fixed, "slope": slope,
            "grid": t_fixed + logit(THRESHOLD_GRID) / slope,
            "population_f1_at_opt": f_opt.tolist(),
            "population_f1_at_fixed": _op_f1(prev, mu, t_fixed).tolist()}


def sim_f1_operating_point(rng: np.random.Generator, *, n_items: int, n_val: int,
                           label_rows: np.ndarray, mu: Sequence[float], grid: Sequence[float],
                           t_fixed: float, tau: float = 0.05, rho: float = 0.0, n_seeds: int = 5,
                           n_resamples: int = 300, n_truth: int = 64) -> dict[str, Result]:
    """One replication of micro-/macro-F1 at the pipeline's operating point: test and
    validation rows drawn with replacement from ``label_rows`` (``[M, C]``, the real label
    vectors of every split: the labels' co-occurrence kept; population prevalence their mean;
    a label may have no test positive: its F1 is 0, as in the pipeline), scores ``N(mu_c + delta_s, 1)`` /
    ``N(0, 1)`` with ``delta_s ~ N(0, tau^2)`` and the share ``rho`` of the noise common to the
    seeds; per seed the validation threshold the pipeline's rule picks on ``grid``
    (:func:`~contrastlab.evaluation.multilabel.choose_threshold` on the validation rows) and
    the fixed ``t_fixed``. Truth: the population F1 averaged over ``n_truth`` further seeds on
    the same validation rows (the validation split is fixed data, like the training set).
    Keys ``micro_f1``, ``macro_f1`` (at ``t_fixed``), ``micro_f1_val_t``, ``macro_f1_val_t``,
    each under the pipeline's per-label (stratified) law, and the same ``..._rows`` under
    whole-row resampling (:func:`row_reps`)."""
    from .multilabel import choose_threshold

    lab = np.asarray(label_rows).astype(np.int64)
    mu, grid = np.asarray(mu, dtype=np.float64), np.sort(np.asarray(grid, dtype=np.float64))
    prev, c = lab.mean(0), lab.shape[1]
    y, yv = lab[rng.integers(0, len(lab), n_items)], lab[rng.integers(0, len(lab), n_val)]
    rv = rng.normal(0, 1, (n_val, c))

    def seed_threshold(delta: float) -> float:
        sv = (mu + delta) * yv + np.sqrt(rho) * rv + np.sqrt(1 - rho) * rng.normal(0, 1, (n_val, c))
        return choose_threshold(yv, sv, grid)

    deltas = rng.normal(0, tau, n_truth)
    truth_t = np.mean([_op_f1(prev, mu + d, t_fixed) for d in deltas], 0)
    truth_v = np.mean([_op_f1(prev, mu + d, seed_threshold(d)) for d in deltas], 0)
    dl = rng.normal(0, tau, n_seeds)
    thr = np.array([[t_fixed, seed_threshold(d)] for d in dl])            # [S, 2]
    scores = ((mu[None, None] + dl[:, None, None]) * y[None] + np.sqrt(rho) * rng.normal(0, 1, (1, n_items, c))
              + np.sqrt(1 - rho) * rng.normal(0, 1, (n_seeds, n_items, c)))
    pts = {}
    for j, sfx in enumerate(("", "_t2")):
        pred = scores >= thr[:, j, None, None]
        tp = (pred & (y[None] == 1)).sum(1).astype(float)
        den = 2 * tp + (pred & (y[None] == 0)).sum(1) + (y.sum(0)[None] - tp)
        pts["micro_f1" + sfx] = 2 * tp.sum(1) / np.maximum(den.sum(1), 1)
        pts["macro_f1" + sfx] = (2 * tp / np.maximum(den, 1e-12)).mean(1)
    laws = {"": stratified_reps_fast(y, scores, thr, n_resamples=n_resamples, rng=rng, min_pos=(),
                                     seed_points=pts),
            "_rows": row_reps(y, scores, thr, n_resamples=n_resamples, rng=rng, seed_points=pts)}
    truth = {"micro_f1": truth_t[0], "macro_f1": truth_t[1], "micro_f1_t2": truth_v[0], "macro_f1_t2": truth_v[1]}
    out = {}
    for law, reps in laws.items():
        for k, v in pts.items():
            e = float(v.mean())
            lo, hi = bias_corrected_interval(e, reps[k])
            out[k.replace("_t2", "_val_t") + law] = (float(truth[k]), e, lo, hi)
    out["threshold_val"] = (np.nan, float(np.mean(thr[:, 1])), np.nan, np.nan)
    return out


def coverage(sim: Callable[..., object], n_rep: int, seed: int = 0, **kw) -> dict[str, float]:
    """Fraction of ``n_rep`` replications of ``sim`` whose interval covers the truth, per
    metric (``"value"`` for single-metric simulators), plus the mean interval width, the
    fraction of intervals containing their own estimate, the mean estimate and truth and the
    number of replications in which the metric was defined (``.n``)."""
    rng = np.random.default_rng(seed)
    hits: dict[str, list[tuple]] = {}
    for _ in range(n_rep):
        res = sim(rng, **kw)
        items = res.items() if isinstance(res, dict) else [("value", res)]
        for k, (truth, est, lo, hi) in items:
            hits.setdefault(k, []).append((lo <= truth <= hi, hi - lo, lo <= est <= hi, est, truth))
    out = {f"{k}.{name}": float(np.mean([h[i] for h in v])) for k, v in hits.items()
           for i, name in enumerate(("coverage", "width", "contains_estimate", "estimate", "truth"))}
    out.update({f"{k}.n": float(len(v)) for k, v in hits.items()})
    return out
