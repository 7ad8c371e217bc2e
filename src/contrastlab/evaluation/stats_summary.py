"""The comparison table: probability of being best, the Model Confidence Set and
:func:`summarize` (:mod:`contrastlab.evaluation.stats`)."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from .stats_tests import (MAX_DRAWS, bias_corrected_interval, holm, holm_unstable,
                          paired_pvalue, pvalue_floor)

__all__ = ["prob_best", "model_confidence_set", "summarize"]


def prob_best(reps: Mapping[str, np.ndarray], *, higher_is_better: bool = True) -> dict[str, float]:
    """Fraction of bootstrap draws in which each method is the best one.

    Args:
        reps: method -> ``[R]`` replicates on shared draws.
        higher_is_better: direction of the metric.

    Returns:
        method -> probability in [0, 1]; a tie within a draw splits that draw equally, so the
        values sum to 1.
    """
    names = list(reps)
    m = np.stack([np.asarray(reps[n], dtype=np.float64) for n in names])  # [M, R]
    if not higher_is_better:
        m = -m
    top = m == m.max(0, keepdims=True)
    share = top / top.sum(0, keepdims=True)
    return {n: float(v) for n, v in zip(names, share.mean(1))}


def model_confidence_set(point: Mapping[str, float], reps: Mapping[str, np.ndarray], *,
                         alpha: float = 0.05, higher_is_better: bool = True) -> dict[str, dict]:
    """Model Confidence Set with the ``T_max`` statistic (Hansen, Lunde & Nason, Econometrica
    2011, Sec. 3.1.2 and the bootstrap implementation of their Sec. 5.1).

    The set of methods that contains the best one with probability ``>= 1 - alpha``. It is
    built by sequential elimination: with ``L_i`` the loss of method ``i`` (the metric, negated
    when higher is better), ``d_i = L_i - mean_{j in M} L_j`` and ``t_i = d_i / se(d_i)``, the
    equivalence hypothesis "all of ``M`` are equally good" is tested by ``T_max = max_i t_i``
    against the bootstrap distribution of ``max_i (d*_i - mean d*_i) / se(d_i)``; when rejected
    at ``alpha`` the worst method (``argmax t_i``) leaves and the test repeats. The MCS p-value
    of a method is the largest test p-value seen up to its elimination (1 for the survivor).
    Because every method is compared with the others jointly, "tied for best" accounts for the
    best having been chosen on the same draws (unlike a test against the observed winner).

    Args:
        point: method -> estimate.
        reps: method -> ``[R]`` replicates on shared draws (a paired bootstrap); they are
            centred on their own mean, so a bias common to all draws does not matter.
        alpha: level (the set is a ``1 - alpha`` confidence set).
        higher_is_better: direction of the metric.

    Returns:
        method -> ``{"in_mcs": bool, "p_mcs": float}``.

    Raises:
        ValueError: fewer than one method, or replicates of different shapes.
    """
    names = list(point)
    if not names:
        raise ValueError("no methods")
    sizes = {np.asarray(reps[n]).shape for n in names}
    if len(sizes) != 1:
        raise ValueError(f"replicates differ in shape across methods: {sorted(sizes)}")
    sign = -1.0 if higher_is_better else 1.0  # loss = sign * metric
    loss = {n: sign * float(point[n]) for n in names}
    boot = {n: sign * np.asarray(reps[n], dtype=np.float64) for n in names}
    alive = list(names)
    p_running = 0.0
    out: dict[str, dict] = {}
    while len(alive) > 1:
        Lbar = np.array([loss[n] for n in alive])
        B = np.stack([boot[n] - boot[n].mean() for n in alive])  # centred [M, R]
        d = Lbar - Lbar.mean()
        dstar = B - B.mean(0, keepdims=True)                     # centred d*_i per draw
        se = np.sqrt((dstar ** 2).mean(1))
        tiny = 1e-12 * max(1.0, float(np.abs(Lbar).max()))
        if np.all(se <= tiny) and np.all(np.abs(d) <= tiny):
            p_running = 1.0  # identical methods: the equivalence hypothesis holds exactly
            break
        se_safe = np.where(se > tiny, se, np.inf)
        t = np.where(se > tiny, d / se_safe, np.where(d > tiny, np.inf, 0.0))
        t_max = float(t.max())
        t_star = (dstar / se_safe[:, None]).max(0)
        p = float((1 + np.count_nonzero(t_star >= t_max)) / (t_star.size + 1))
        p_running = max(p_running, p)
        if p >= alpha:
            break
        worst = alive[int(np.argmax(t))]
        out[worst] = {"in_mcs": False, "p_mcs": p_running}
        alive.remove(worst)
    for n in alive:
        out[n] = {"in_mcs": True, "p_mcs": 1.0 if len(alive) == 1 else p_running}
    return {n: out[n] for n in names}


def summarize(point: Mapping[str, float], reps: Mapping[str, np.ndarray], *,
              higher_is_better: bool = True, alpha: float = 0.05, confidence: float = 0.95,
              baseline: str | None = None, candidates: Sequence[str] | None = None,
              redraw: Callable[[int], tuple] | None = None, max_draws: int = MAX_DRAWS
              ) -> dict[str, dict]:
    """One table's statistics: CIs, the selection-aware best set, tests against a baseline.

    Args:
        point: method -> point estimate of the metric.
        reps: method -> ``[R]`` replicates on shared draws (same ``R`` for all).
        higher_is_better: direction of the metric.
        alpha: level of the Model Confidence Set and family-wise level of the Holm-corrected
            tests.
        confidence: level of the CI (:func:`bias_corrected_interval`).
        baseline: a method every other candidate is tested against in both directions (the
            strongest baseline); ``beats_baseline`` / ``below_baseline`` are True when the
            difference is significant after Holm.
        candidates: methods that compete for "best" (default: every method). Baselines belong
            here; leave out only reference rows (published numbers, ablations).
        redraw: ``R -> (point, reps)`` with ``R`` fresh draws (a table whose per-item
            scores are at hand). While a Holm decision against the baseline is within
            Monte-Carlo error of ``alpha`` (:func:`holm_unstable`), the table is recomputed
            with twice the draws, up to ``max_draws``. Without it the given replicates decide.
            Every p is the bootstrap tail p (:func:`paired_pvalue`), never below its floor.
            The family of the baseline tests is every other candidate against the baseline
            (``m`` = their number): the comparisons a reader is promised.

    Returns:
        method -> ``{"mean", "ci_low", "ci_high", "n_resamples"}`` and, for candidates,
        ``"is_best"`` (highest point estimate), ``"p_best"`` (:func:`prob_best`),
        ``"in_mcs"``, ``"p_mcs"`` (:func:`model_confidence_set` at ``alpha``),
        ``"tied_for_best"`` (= ``in_mcs``), ``"delta_vs_best"``, ``"p_vs_best"`` and
        ``"p_vs_best_holm"`` (paired test against the observed best, kept for reference; the
        tie is decided by the MCS) and, with a baseline, for every other candidate
        ``"delta_vs_baseline"`` with its 95 % BC interval ``"delta_ci_low", "delta_ci_high"``
        (of the paired difference replicates), ``"p_vs_baseline", "p_vs_baseline_holm",
        "beats_baseline", "below_baseline"``.

    Raises:
        ValueError: unknown baseline/candidate, mismatched replicate counts, or no candidate.
    """
    names = list(point)
    missing = [n for n in names if n not in reps]
    if missing:
        raise ValueError(f"no replicates for {missing}")
    sizes = {np.asarray(reps[n]).shape for n in names}
    if len(sizes) != 1:
        raise ValueError(f"replicates differ in shape across methods: {sorted(sizes)}")
    if baseline is not None and baseline not in point:
        raise ValueError(f"baseline {baseline!r} is not a method ({names})")
    cands = list(candidates) if candidates is not None else list(names)
    unknown = [c for c in cands if c not in point]
    if unknown or not cands:
        raise ValueError(f"bad candidates {cands} (methods: {names})")
    sign = 1.0 if higher_is_better else -1.0
    out: dict[str, dict] = {}
    for n in names:
        r = np.asarray(reps[n], dtype=np.float64)
        lo, hi = bias_corrected_interval(float(point[n]), r, confidence)
        out[n] = {"mean": float(point[n]), "ci_low": lo, "ci_high": hi,
                  "n_resamples": int(r.size)}
    best = max(cands, key=lambda c: sign * point[c])
    pb = prob_best({c: reps[c] for c in cands}, higher_is_better=higher_is_better)
    mcs = model_confidence_set({c: point[c] for c in cands}, {c: reps[c] for c in cands},
                               alpha=alpha, higher_is_better=higher_is_better)
    others = [c for c in cands if c != best]
    n_rep = int(next(iter(sizes))[0]) if next(iter(sizes)) else 1
    p_best = [paired_pvalue(sign * (np.asarray(reps[best]) - np.asarray(reps[c]))) for c in others]
    p_best_holm = holm(p_best)
    for c in cands:
        out[c].update(p_best=pb[c], in_mcs=mcs[c]["in_mcs"], p_mcs=mcs[c]["p_mcs"],
                      tied_for_best=mcs[c]["in_mcs"])
    out[best].update(is_best=True, delta_vs_best=0.0, p_vs_best=1.0, p_vs_best_holm=1.0)
    for c, p, ph in zip(others, p_best, p_best_holm):
        out[c].update(is_best=False, delta_vs_best=float(point[c] - point[best]),
                      p_vs_best=p, p_vs_best_holm=float(ph))
    if baseline is not None:
        tested = [c for c in cands if c != baseline]
        p_base = [paired_pvalue(sign * (np.asarray(reps[c]) - np.asarray(reps[baseline])))
                  for c in tested]
        if redraw is not None and n_rep < max_draws and holm_unstable(p_base, n_rep, alpha):
            return summarize(*redraw(min(max_draws, 2 * n_rep)), higher_is_better=higher_is_better,
                             alpha=alpha, confidence=confidence, baseline=baseline,
                             candidates=candidates, redraw=redraw, max_draws=max_draws)
        floor = pvalue_floor(n_rep, len(tested))
        for c, p, ph in zip(tested, p_base, holm(p_base)):
            delta = float(point[c] - point[baseline])
            sig = bool(ph < alpha)
            d_lo, d_hi = bias_corrected_interval(
                delta, np.asarray(reps[c], dtype=np.float64) - np.asarray(reps[baseline]), confidence)
            out[c].update(delta_vs_baseline=delta, delta_ci_low=d_lo, delta_ci_high=d_hi,
                          p_vs_baseline=p, p_vs_baseline_holm=float(ph),
                          beats_baseline=sig and sign * delta > 0,
                          below_baseline=sig and sign * delta < 0,
                          test="bootstrap", family_size=len(tested), p_floor=floor)
    return out
