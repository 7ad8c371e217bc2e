"""Paired bootstrap p-values, their resolution (how many draws a test needs, when to fall
back to a normal approximation), Holm's correction and the bias-corrected interval
(:mod:`contrastlab.evaluation.stats`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["paired_pvalue", "pvalue_floor", "draws_for", "choose_test", "resolution_note", "holm",
           "table_resolution", "bias_corrected_interval"]


def paired_pvalue(diff_reps: np.ndarray, *, point: float | None = None,
                  method: str = "bootstrap") -> float:
    """Two-sided paired p-value of ``H0: difference = 0`` from bootstrap replicates.

    Args:
        diff_reps: ``[R]`` bootstrap replicates of a difference ``a - b`` on shared draws.
        point: the observed difference (needed by ``method="wald"``).
        method: ``"bootstrap"``: twice the smaller tail mass of the replicates at zero, with
            the ``+1`` correction of Davison & Hinkley (1997, Eq. 4.11) so it is never 0,
            capped at 1; its smallest value is ``2 / (R + 1)`` (:func:`pvalue_floor`).
            ``"wald"``: ``2 Phi(-|point| / se)`` with ``se`` the standard deviation of the
            replicates (the bootstrap standard error; Efron & Tibshirani 1993, Ch. 6 and
            Sec. 16.4; Wasserman, "All of Statistics", 2004, Sec. 10.1, the Wald test): no
            floor, valid when the difference is close to normal (means over many items).

    Returns:
        float p in (0, 1]. An identically zero difference gives ``p = 1`` (a tie).

    Raises:
        ValueError: no replicates, an unknown method, or ``wald`` without ``point``.
    """
    d = np.asarray(diff_reps, dtype=np.float64)
    if d.size == 0:
        raise ValueError("no bootstrap replicates")
    if method == "wald":
        if point is None:
            raise ValueError("the Wald test needs the observed difference (point=)")
        se = float(d.std(ddof=1)) if d.size > 1 else 0.0
        if se <= 1e-15 * max(1.0, abs(point)):
            return 1.0 if abs(point) <= 1e-15 else float(np.nextafter(0.0, 1.0))
        from scipy.stats import norm

        return float(min(1.0, 2 * norm.sf(abs(point) / se)))
    if method != "bootstrap":
        raise ValueError(f"unknown test {method!r} (bootstrap or wald)")
    lo = (1 + np.count_nonzero(d <= 0)) / (d.size + 1)
    hi = (1 + np.count_nonzero(d >= 0)) / (d.size + 1)
    return float(min(1.0, 2 * min(lo, hi)))


def pvalue_floor(n_resamples: int, m: int) -> float:
    """Smallest attainable Holm-adjusted paired-bootstrap p over a family of ``m`` tests:
    ``min(1, m * 2 / (R + 1))`` (the raw floor of :func:`paired_pvalue` times Holm's first
    multiplier; every later adjusted p is at least that). ``m = 0`` gives 0."""
    if m <= 0:
        return 0.0
    return float(min(1.0, 2.0 * m / (n_resamples + 1)))


def draws_for(m: int, alpha: float = 0.05, *, ratio: float = 10.0, minimum: int = 2000,
              step: int = 1000) -> int:
    """Number of bootstrap draws ``R`` whose Holm floor (:func:`pvalue_floor`) over ``m`` tests
    is at most ``alpha / ratio``: ``R + 1 >= 2 m ratio / alpha``, rounded up to a multiple of
    ``step`` and at least ``minimum``; e.g. 10,000 for 24 rows at alpha 0.05 (the floor 0.0048).
    At ``R = 10,000`` the Monte-Carlo error of a p near 0.05 is about 0.002 (Davison &
    Hinkley 1997, Sec. 4.2.5), negligible beside alpha."""
    if m < 0 or not 0 < alpha < 1 or ratio <= 0:
        raise ValueError(f"need m >= 0, 0 < alpha < 1, ratio > 0 (got {m}, {alpha}, {ratio})")
    need = int(np.ceil(2.0 * m * ratio / alpha)) - 1
    return int(max(minimum, -(-need // step) * step))


def choose_test(n_resamples: int, m: int, alpha: float = 0.05, ratio: float = 10.0) -> str:
    """``"bootstrap"`` when the paired bootstrap's Holm floor over ``m`` tests with ``R`` draws
    is at most ``alpha / ratio``; otherwise ``"wald"`` (the normal approximation with the
    bootstrap standard error, :func:`paired_pvalue`), which has no floor. Tables whose
    replicates are computed in the report use :func:`draws_for` and get the bootstrap test;
    the Wald test serves replicates stored by a stage with fewer draws."""
    return "bootstrap" if pvalue_floor(n_resamples, m) <= alpha / ratio else "wald"


def resolution_note(n_resamples: int, m: int, test: str = "bootstrap", *,
                    correction: str = "Holm") -> str:
    """Caption text stating the draws, the family size and the smallest attainable corrected
    p, e.g. ``"10,000 paired bootstrap draws; Holm over 24 comparisons; smallest attainable
    p 0.0048"``."""
    if test == "wald":
        return (f"{n_resamples:,} paired bootstrap draws; p from the normal approximation with "
                f"the bootstrap SE (Wald), {correction} over {m} comparisons; no floor")
    return (f"{n_resamples:,} paired bootstrap draws; {correction} over {m} comparisons; "
            f"smallest attainable p {pvalue_floor(n_resamples, m):.2g}")


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
    ``n_resamples``, ``family_size`` and ``test``); ``""`` when no row was tested."""
    tested = [e for e in stats.values() if isinstance(e, Mapping) and "test" in e]
    if not tested:
        return ""
    e = tested[0]
    return resolution_note(int(e["n_resamples"]), int(e["family_size"]), str(e["test"]))


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
