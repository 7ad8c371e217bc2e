"""Paired bootstrap p-values, their resolution (how many draws a test needs, when a Holm
decision needs more), their display, Holm's correction and the bias-corrected interval
(:mod:`contrastlab.evaluation.stats`)."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

__all__ = ["paired_pvalue", "pvalue_floor", "draws_for", "holm_unstable", "settle_draws",
           "format_p", "baseline_p", "resolution_note", "holm", "table_resolution",
           "bias_corrected_interval", "MAX_DRAWS"]

#: The most draws :func:`settle_draws` takes for a table computed in the report (the issue-55
#: check of the fine-tuning comparisons used 40,000).
MAX_DRAWS = 40_000


def paired_pvalue(diff_reps: np.ndarray) -> float:
    """Two-sided paired p-value of ``H0: difference = 0`` from bootstrap replicates: twice the
    smaller tail mass of the replicates at zero, with the ``+1`` correction of Davison &
    Hinkley (1997, Eq. 4.11) so it is never 0, capped at 1. Its smallest value is
    ``2 / (R + 1)`` (:func:`pvalue_floor`): the draws support nothing smaller. No normal
    (Wald) approximation: on the discrete, skewed kNN-purity metrics it was 8-15 times the
    tail p (issue 55), and below the floor it extrapolates (``9e-46`` from 1,000 draws).

    Args:
        diff_reps: ``[R]`` bootstrap replicates of a difference ``a - b`` on shared draws.

    Returns:
        float p in (0, 1]. An identically zero difference gives ``p = 1`` (a tie).

    Raises:
        ValueError: no replicates.
    """
    d = np.asarray(diff_reps, dtype=np.float64)
    if d.size == 0:
        raise ValueError("no bootstrap replicates")
    lo = (1 + np.count_nonzero(d <= 0)) / (d.size + 1)
    hi = (1 + np.count_nonzero(d >= 0)) / (d.size + 1)
    return float(min(1.0, 2 * min(lo, hi)))


def pvalue_floor(n_resamples: int, m: int = 1) -> float:
    """Smallest attainable Holm-adjusted paired-bootstrap p over a family of ``m`` tests:
    ``min(1, m * 2 / (R + 1))`` (the raw floor of :func:`paired_pvalue` times Holm's first
    multiplier; every later adjusted p is at least that). ``m = 1``: the raw floor; ``m = 0``
    gives 0."""
    return float(min(1.0, 2.0 * m / (n_resamples + 1))) if m > 0 else 0.0


def draws_for(m: int, alpha: float = 0.05, *, ratio: float = 10.0, minimum: int = 2000,
              step: int = 1000) -> int:
    """Number of bootstrap draws ``R`` whose Holm floor (:func:`pvalue_floor`) over ``m`` tests
    is at most ``alpha / ratio``: ``R + 1 >= 2 m ratio / alpha``, rounded up to a multiple of
    ``step`` and at least ``minimum``; e.g. 10,000 for 24 rows at alpha 0.05 (the floor 0.0048).
    The start of :func:`settle_draws`."""
    if m < 0 or not 0 < alpha < 1 or ratio <= 0:
        raise ValueError(f"need m >= 0, 0 < alpha < 1, ratio > 0 (got {m}, {alpha}, {ratio})")
    need = int(np.ceil(2.0 * m * ratio / alpha)) - 1
    return int(max(minimum, -(-need // step) * step))


def holm_unstable(pvalues: Sequence[float], n_resamples: int, alpha: float = 0.05,
                  z: float = 2.576) -> bool:
    """Whether a Holm decision at ``alpha`` is within Monte-Carlo error: some tail p
    ``p_(j)`` (ascending, Holm multiplier ``k = m - j + 1``) has its threshold ``alpha / k``
    inside the 99 % interval ``p_(j) +- z sqrt(p_(j) (2 - p_(j)) / R)`` (the tail p is twice a
    binomial share of ``R`` draws; Davison & Hinkley 1997, Sec. 4.2.5). Another set of draws
    could then flip that decision."""
    p = np.sort(np.asarray(pvalues, dtype=np.float64))
    k = p.size - np.arange(p.size)
    return bool(np.any(np.abs(p - alpha / k) <= z * np.sqrt(p * (2 - p) / n_resamples)))


def settle_draws(run: Callable[[int], tuple], m: int, alpha: float = 0.05, *,
                 start: int | None = None, cap: int = MAX_DRAWS) -> tuple:
    """Draw until the Holm decisions are stable: ``run(R) -> (result, pvalues)`` is called
    with ``R = start`` (default :func:`draws_for` of the family size ``m``), and again with
    ``R`` doubled (at most ``cap``) while :func:`holm_unstable`. Returns ``(result, R)``."""
    r = start or draws_for(m, alpha)
    res, p = run(r)
    while r < cap and len(p) and holm_unstable(p, r, alpha):
        r = min(cap, 2 * r)
        res, p = run(r)
    return res, r


def _up2(x: float) -> str:
    """``x`` rounded *up* to two significant digits (a bound stays a bound)."""
    if x <= 0:
        return "0"
    e = int(np.floor(np.log10(x))) - 1
    return f"{np.ceil(round(x / 10.0 ** e, 9)) * 10.0 ** e:.2g}"


def format_p(p: float | None, n_resamples: int | None = None, family_size: int = 1, *,
             floor: float | None = None) -> str:
    """The one way a p-value is printed. A bootstrap p (``n_resamples`` = its draws ``R``) at
    or below the resolution of its family (:func:`pvalue_floor` of ``R`` and ``family_size``
    -- ``2 / (R + 1)`` for a raw p, ``m`` times that after Holm) reads ``p ≤ 0.0014`` (the
    floor, rounded up): the draws cannot tell a smaller p apart, so none is printed. Otherwise
    two significant digits below 0.1, two decimals above (``p = 0.012``, ``p = 0.43``).
    Without ``n_resamples`` (an analytic p, e.g. Wilcoxon or Friedman) a p below 0.001 reads
    ``p < 0.001``. None / NaN: ``p n/a``.
    ``floor``: the floor itself, where the draws are not at hand (a figure row, a summary)."""
    if p is None or not np.isfinite(p):
        return "p n/a"
    if n_resamples:
        floor = pvalue_floor(int(n_resamples), max(1, int(family_size)))
    if floor:
        if p <= floor * (1 + 1e-9):
            return f"p ≤ {_up2(floor)}"
    elif p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}" if p < 0.1 else f"p = {p:.2f}"


def baseline_p(entry: Mapping) -> str:
    """:func:`format_p` of a :func:`summarize` row's Holm-corrected test against the baseline
    (``p_vs_baseline_holm`` at its ``n_resamples`` and ``family_size``)."""
    return format_p(entry.get("p_vs_baseline_holm"), entry.get("n_resamples"),
                    entry.get("family_size", 1))


def resolution_note(n_resamples: int, m: int, *, correction: str = "Holm") -> str:
    """Caption text stating the draws, the family size and the smallest attainable corrected
    p, e.g. ``"10,000 paired bootstrap draws (tail p); Holm over 24 comparisons; smallest
    attainable p 0.0048, shown as p ≤ 0.0048"``."""
    return (f"{n_resamples:,} paired bootstrap draws (tail p); {correction} over {m} comparisons; "
            f"smallest attainable p {_up2(pvalue_floor(n_resamples, m))}, shown as "
            f"{format_p(0.0, n_resamples, m)}")


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order.

    ``p_adj_(j) = max_{k<=j} min(1, (m - k + 1) p_(k))`` for the ascending order ``p_(1..m)``.
    Reject ``H_j`` at level alpha iff ``p_adj_j < alpha``. Empty input gives an empty array.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.size == 0:
        return p
    if np.any((p < 0) | (p > 1) | np.isnan(p)):
        raise ValueError(f"p-values must lie in [0, 1]: {p.tolist()}")
    m = p.size
    order = np.argsort(p, kind="stable")
    adj_sorted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj_sorted
    return out


def table_resolution(stats: Mapping[str, Mapping]) -> str:
    """:func:`resolution_note` of one :func:`summarize` result (its tested rows carry
    ``n_resamples``, ``family_size`` and ``test``); ``""`` when no row was tested. A result
    stored by an older stage run with ``test: "wald"`` says so (its p are shown no lower
    than the tail p's floor)."""
    tested = [e for e in stats.values() if isinstance(e, Mapping) and "test" in e]
    if not tested:
        return ""
    e = tested[0]
    r, m = int(e["n_resamples"]), int(e["family_size"])
    if e["test"] != "bootstrap":
        return (f"{r:,} paired bootstrap draws; Holm over {m} comparisons; p from the normal "
                f"(Wald) approximation of an older stage run, shown no lower than the tail p's "
                f"floor {_up2(pvalue_floor(r, m))}: rerun the stage for the tail p")
    return resolution_note(r, m)


def bias_corrected_interval(point: float, reps: np.ndarray, confidence: float = 0.95
                            ) -> tuple[float, float]:
    """Bias-corrected (BC) percentile interval: BCa with acceleration 0 (Efron, "Nonparametric
    standard errors and confidence intervals", Can. J. Statist. 1981; Efron & Tibshirani,
    "An Introduction to the Bootstrap", 1993, Sec. 14.3, Eq. 14.10-14.14 with ``a = 0``).

    ``z0 = Phi^-1(#(reps < point) / R)`` (ties count half) measures the median bias of the
    replicates; the interval is the ``(Phi(2 z0 - z), Phi(2 z0 + z))`` quantiles of ``reps``
    with ``z = Phi^-1((1 + confidence) / 2)``. When the replicates sit above the estimate
    (average precision on resampled rows, where a duplicated positive raises the precision of
    its own rank; ``z0 < 0``) the interval moves *down* by about twice that bias, centring it
    on ``point - bias`` (the bias-corrected estimate) instead of on ``point``: the bias is
    removed, not hidden. For a mean of per-item scores ``z0 ~ 0`` and this is the percentile
    interval. The interval contains ``point`` iff ``|z0| <= z`` (the estimate lies inside the
    central ``confidence`` part of its own bootstrap distribution). Coverage is checked by
    simulation at every data set's shape (``bench/bench_coverage.py``,
    ``reports/metrics/coverage.json``).

    Args:
        point: the estimate on the original data (float).
        reps: ``[R]`` float bootstrap replicates of the same statistic (R >= 1, finite).
        confidence: two-sided level in (0, 1).

    Returns:
        ``(low, high)`` floats, ``low <= high``; ``(point, point)`` when every replicate
        equals ``point``.

    Raises:
        ValueError: no replicates, non-finite replicates or point, or a level outside (0, 1).
    """
    from scipy.stats import norm

    r = np.asarray(reps, dtype=np.float64).ravel()
    if r.size == 0:
        raise ValueError("no bootstrap replicates")
    if not (0 < confidence < 1):
        raise ValueError(f"confidence must lie in (0, 1) (got {confidence})")
    if not (np.isfinite(r).all() and np.isfinite(point)):
        raise ValueError("bootstrap replicates and the point estimate must be finite")
    below = np.count_nonzero(r < point) + 0.5 * np.count_nonzero(r == point)
    if below == r.size / 2 and np.all(r == point):
        return float(point), float(point)
    frac = np.clip(below / r.size, 0.5 / r.size, 1 - 0.5 / r.size)
    z0 = norm.ppf(frac)
    z = norm.ppf((1 + confidence) / 2)
    lo, hi = np.quantile(r, norm.cdf([2 * z0 - z, 2 * z0 + z]))
    return float(lo), float(hi)
