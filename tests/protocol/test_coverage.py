"""Coverage of every interval procedure the pipeline uses, by simulation.

Each test draws 200 synthetic data sets shaped like a track's test data from a population
whose value is known, runs the track's interval procedure, and requires the nominal 95%
interval to cover the population value in 92-98% of them (about +-2 binomial standard errors
around 95% at 200 replications) and to contain its own estimate every time. Larger runs:
``python bench/bench_coverage.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from contrastlab.evaluation.coverage import (coverage, population_accuracy, population_ap,
                                             sim_accuracy, sim_clustered_hits, sim_multilabel)

N_REP = 200


def _check(cov: dict, key: str) -> None:
    assert 0.92 <= cov[f"{key}.coverage"] <= 0.98, cov
    assert cov[f"{key}.contains_estimate"] == 1.0, cov


def test_population_values_are_right():
    # AP of a perfect separation is 1; of no separation it is the prevalence.
    assert population_ap(0.2, 12.0) == pytest.approx(1.0, abs=1e-4)
    assert population_ap(0.3, 0.0) == pytest.approx(0.3, abs=1e-3)
    # a Monte-Carlo check of the analytic AP: sklearn on a large sample
    from sklearn.metrics import average_precision_score
    rng = np.random.default_rng(0)
    y = rng.random(200_000) < 0.1
    s = 1.5 * y + rng.normal(0, 1, y.size)
    assert population_ap(0.1, 1.5) == pytest.approx(average_precision_score(y, s), abs=5e-3)
    # Beta(8, 2) without seed noise: the mean 0.8
    assert population_accuracy(8.0, 2.0, 0.0) == pytest.approx(0.8, abs=2e-3)


def test_graph_accuracy_interval_covers():
    # the graph track's shape: 1000 test nodes, 10 seeds
    cov = coverage(sim_accuracy, N_REP, seed=1, n_items=1000, n_seeds=10, n_resamples=500)
    _check(cov, "value")


def test_clustered_rank_at_k_interval_covers():
    # the code track's shape: ~39 repository groups of ~38 test signatures, 3 seeds
    cov = coverage(sim_clustered_hits, N_REP, seed=5, n_resamples=500)
    _check(cov, "value")


def test_multilabel_map_and_f1_intervals_cover():
    # a small multi-label test split (300 rows, 5 labels at 5-40 % prevalence), 3 seeds
    cov = coverage(sim_multilabel, N_REP, seed=3, n_items=300, n_resamples=200)
    for key in ("map", "micro_f1", "macro_f1"):
        _check(cov, key)


def test_plain_row_bootstrap_would_fail_the_multilabel_check():
    """The check can fail: the old procedure (row bootstrap, plain percentile interval) on a
    split with labels of a single positive (as in medical) drops those labels from a draw's
    mean whenever their positive is not drawn (37 % of draws), so its interval sits above the
    estimate; the stratified procedure with the bias-corrected interval does not."""
    from contrastlab.evaluation.multilabel import (bootstrap_metric_reps, multilabel_metrics,
                                                   stratified_metric_reps)
    from contrastlab.evaluation.stats import bias_corrected_interval, resample_indices

    rng = np.random.default_rng(0)
    n, rare, common = 200, 8, 2
    misses_old = misses_new = 0
    for _ in range(10):
        y = np.zeros((n, rare + common), dtype=np.int64)
        y[rng.choice(n, rare, replace=False), np.arange(rare)] = 1   # one positive each
        y[:, rare:] = rng.random((n, common)) < 0.3
        s = 3.0 * y + rng.normal(0, 1, y.shape)
        s[:, :rare] = rng.normal(0, 1, (n, rare))                      # rare labels: no signal
        est = multilabel_metrics(y, s)["map"]
        draws = resample_indices(1, n, n_resamples=300, seed=int(rng.integers(1 << 30)))
        old = bootstrap_metric_reps(y, s[None], np.array([0.5]), draws)["map"]
        lo, hi = np.quantile(old, [0.025, 0.975])
        misses_old += not (lo <= est <= hi)
        new = stratified_metric_reps(y, s[None], np.array([0.5]), n_resamples=300, seed=1)["map"]
        lo, hi = bias_corrected_interval(est, new)
        misses_new += not (lo <= est <= hi)
    assert misses_old >= 5 and misses_new == 0
