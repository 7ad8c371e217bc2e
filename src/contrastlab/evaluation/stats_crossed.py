"""The two-level bootstrap without the double-counted seed x item variance (crossed effects).

A method's score on a test set is a mean over test items ``i`` of a value that depends on the
training seed ``s`` as well: ``x_si = mu + a_s + b_i + c_si`` (seed effect ``a``, item effect
``b``, seed-by-item interaction ``c``, variances ``sigma_a^2, sigma_b^2, sigma_c^2``). The mean
over ``S`` seeds and ``I`` items has variance

    Var = sigma_a^2 / S + sigma_b^2 / I + sigma_c^2 / (S I).

Resampling seeds and items independently (the plain two-level bootstrap of
:func:`contrastlab.evaluation.stats.bootstrap_per_item`) counts the interaction twice: the item
resample sees ``(sigma_b^2 + sigma_c^2 / S) / I``, and the seed resample sees the seeds'
observed spread ``s^2 = sigma_a^2 + sigma_c^2 / I`` (more on a draw that duplicates items), so
the replicates' variance exceeds ``Var`` by at least ``sigma_c^2 / (S I)`` (Owen, "The pigeonhole
bootstrap", Ann. Appl. Stat. 2007, Sec. 2-3, on bootstrapping crossed random effects; McCullagh,
Bernoulli 2000, on why no plain resampling of a crossed array is exact). Where the interaction
dominates (a correct/incorrect outcome that flips between seeds on the same items), the
intervals over-cover: 0.98-0.99 in the project's simulations (docs/statistics.md).

The replicates here keep the two parts apart and remove the interaction from the seed part:

    rep_r = Mbar_r + lambda (mbar*_r - mbar),

- ``Mbar_r``: the mean over **all** ``S`` seeds of the metric on draw ``r``'s items (item and
  interaction variance, counted once);
- ``mbar*_r - mbar``: the mean of the ``S - 1`` seeds drawn with replacement minus the mean of
  all seeds, each seed at its **observed** value on the whole test set (the n-1 bootstrap of
  :func:`contrastlab.evaluation.stats.resample_counts`; variance ``s^2 / S``);
- ``lambda^2 = max(0, s^2 - V_c) / s^2``, where ``V_c`` (the interaction's share of one seed's
  mean, ``sigma_c^2 / I``) is estimated from the item draws themselves: the per-seed variance
  over draws, averaged over seeds, minus the variance of the seed mean, times ``S / (S - 1)``
  (``E[v_s] - E[v_mean] = (1 - 1/S) sigma_c^2 / I``; a method-of-moments estimate, as in
  Owen 2007, Sec. 3).

The replicate variance is then ``(sigma_b^2 + sigma_c^2 / S) / I + sigma_a^2 / S``: the
variance of the estimate. With no interaction (``V_c = 0``) the seed part is the plain n-1 seed
bootstrap; with one seed (or seeds whose outputs coincide) there is no seed part. The metric
need not be a mean: F1 and AP enter through their values per seed and draw (a delta-method
reading of the same decomposition).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .stats_resample import Counts, cluster_sums, per_item_draws

__all__ = ["interaction_variance", "crossed_reps", "bootstrap_per_item_crossed"]


def interaction_variance(per_draw: np.ndarray) -> float:
    """Method-of-moments estimate of ``V_c = sigma_c^2 / I``, the seed-by-item interaction's
    variance in one seed's mean (Owen 2007, Sec. 3).

    Args:
        per_draw: float ``[R, S]``: the metric of seed ``s`` on item draw ``r`` (every seed
            evaluated on the same draws).

    Returns:
        ``max(0, (mean_s Var_r[M_rs] - Var_r[mean_s M_rs]) S / (S - 1))``; 0.0 when ``S = 1``
        or ``R = 1``.

    Raises:
        ValueError: not a 2-D array.
    """
    m = np.asarray(per_draw, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"per_draw must be [R, S]; got shape {m.shape}")
    n_s = m.shape[1]
    if n_s < 2 or m.shape[0] < 2:  # one seed, or one draw: nothing to estimate
        return 0.0
    v_seed = m.var(0, ddof=1).mean()
    v_mean = m.mean(1).var(ddof=1)
    return float(max(0.0, (v_seed - v_mean) * n_s / (n_s - 1)))


def crossed_reps(per_draw: np.ndarray, seed_points: Sequence[float] | np.ndarray,
                 seed_weights: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """Replicates of a seed-mean metric with the interaction counted once (module docstring).

    Args:
        per_draw: float ``[R, S]``: the metric of each seed on each item draw.
        seed_points: ``[S]``: each seed's metric on the whole test set.
        seed_weights: float ``[R, S]`` multiplicities of the drawn seeds (rows sum to
            ``S - 1``, the n-1 bootstrap; :class:`contrastlab.evaluation.stats.Counts`
            ``.seeds``), or an integer ``[R, S']`` array of drawn seed indices.

    Returns:
        ``(reps [R] float64, info)``; ``info``: ``s2`` (the seeds' observed variance, ddof 1),
        ``v_interaction`` (``V_c``), ``shrink`` (``lambda``).

    Raises:
        ValueError: shapes disagree, or seed indices out of range.
    """
    m = np.asarray(per_draw, dtype=np.float64)
    pts = np.asarray(seed_points, dtype=np.float64).ravel()
    if m.ndim != 2 or pts.shape != (m.shape[1],):
        raise ValueError(f"per_draw {m.shape} and seed_points {pts.shape} disagree")
    r, n_s = m.shape
    w = np.asarray(seed_weights)
    if w.ndim != 2 or w.shape[0] != r:
        raise ValueError(f"seed_weights has shape {w.shape}; expected [{r}, ...]")
    if np.issubdtype(w.dtype, np.integer):  # drawn indices -> multiplicities
        if w.size and (w.min() < 0 or w.max() >= n_s):
            raise ValueError(f"seed indices outside [0, {n_s})")
        w = np.stack([np.bincount(row, minlength=n_s) for row in w])
    elif w.shape[1] != n_s:
        raise ValueError(f"seed_weights has {w.shape[1]} columns; expected {n_s}")
    w = w.astype(np.float64)
    item_part = m.mean(1)
    if n_s < 2:
        return item_part, {"s2": 0.0, "v_interaction": 0.0, "shrink": 0.0}
    s2 = float(pts.var(ddof=1))
    v_c = interaction_variance(m)
    shrink = float(np.sqrt(max(0.0, s2 - v_c) / s2)) if s2 > 0 else 0.0
    seed_part = (w @ pts) / np.maximum(w.sum(1), 1e-12) - pts.mean()
    return item_part + shrink * seed_part, {"s2": s2, "v_interaction": v_c, "shrink": shrink}


def bootstrap_per_item_crossed(per_item: Mapping[str, np.ndarray], *, clusters=None,
                               n_resamples: int = 1000, seed: int = 0,
                               draws: Counts | None = None
                               ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """:func:`contrastlab.evaluation.stats.bootstrap_per_item` with :func:`crossed_reps`: the
    same draws (seeds n-1 of n; items, or clusters n-1 of n), the interaction counted once.

    Args:
        per_item: method -> ``[S, I]`` float per-item scores (all methods the same shape;
            seed ``k`` and item ``j`` mean the same thing in every method).
        clusters, n_resamples, seed: as :func:`contrastlab.evaluation.stats.resample_counts`
            (ignored when ``draws`` is given).
        draws: precomputed :class:`~contrastlab.evaluation.stats.Counts`.

    Returns:
        ``(point, reps)``: ``point[name]`` the mean over seeds and items, ``reps[name]``
        ``[R]`` float64.

    Raises:
        ValueError: empty input, methods of different shapes, draws of another size.
    """
    arrs, draws, point = per_item_draws(per_item, draws, clusters=clusters,
                                        n_resamples=n_resamples, seed=seed)
    if draws.items is None:  # the metric of each seed on each draw: its drawn clusters' mean
        wc = draws.clusters
        sizes, sums = cluster_sums(draws, arrs)
        denom = (wc @ sizes)[:, None]
        per_draw = {k: (wc @ x.T) / denom for k, x in sums.items()}
    else:
        wf = draws.items.astype(np.float64)
        denom = wf.sum(1)[:, None]
        per_draw = {k: (wf @ a.T) / denom for k, a in arrs.items()}
    return point, {k: crossed_reps(m, arrs[k].mean(1), draws.seeds)[0] for k, m in per_draw.items()}
