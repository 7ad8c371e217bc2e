"""contrastlab.evaluation.stats against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from contrastlab.evaluation.stats import (bootstrap_per_item, friedman_nemenyi, holm,
                                          paired_pvalue, plot_cd, resample_indices, summarize)


def test_holm_hand_made():
    # p = [0.01, 0.04, 0.03, 0.005]; ascending 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1
    # = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0])  # capped at 1
    assert holm([]).size == 0
    with pytest.raises(ValueError):
        holm([0.1, 1.5])


def test_resample_indices_shapes_and_clusters():
    draws = resample_indices(3, 6, clusters=[0, 0, 1, 1, 1, 2], n_resamples=50, seed=1)
    assert len(draws) == 50
    for s, i in draws:
        assert s.shape == (3,) and s.max() < 3
        # whole clusters only: {0,1} together, {2,3,4} together
        cnt = np.bincount(i, minlength=6)
        assert cnt[0] == cnt[1] and cnt[2] == cnt[3] == cnt[4]
    with pytest.raises(ValueError):
        resample_indices(3, 6, clusters=[0, 1], n_resamples=5)
    a = resample_indices(2, 10, n_resamples=3, seed=7)
    b = resample_indices(2, 10, n_resamples=3, seed=7)
    assert all((x[1] == y[1]).all() for x, y in zip(a, b))


def test_bootstrap_per_item_matches_loop():
    rng = np.random.default_rng(0)
    x = rng.random((3, 40))
    draws = resample_indices(3, 40, n_resamples=20, seed=3)
    point, reps = bootstrap_per_item({"m": x}, draws=draws)
    loop = [x[np.ix_(s, i)].mean() for s, i in draws]
    np.testing.assert_allclose(reps["m"], loop)
    assert point["m"] == pytest.approx(x.mean())


def test_known_difference_detected_and_zero_difference_is_a_tie():
    rng = np.random.default_rng(0)
    truth = rng.random((5, 2000))
    good = (truth < 0.85).astype(float)   # ~85% accuracy
    bad = (truth < 0.70).astype(float)    # ~70%: every item bad gets right, good gets right too
    same = good.copy()
    point, reps = bootstrap_per_item({"good": good, "bad": bad, "same": same},
                                     n_resamples=1000, seed=0)
    out = summarize(point, reps, baseline="bad", candidates=["good", "same"])
    assert out["good"]["is_best"] or out["same"]["is_best"]
    # identical predictions: difference exactly 0 on every draw -> p = 1, tied
    assert out["same"]["tied_for_best"] and out["good"]["tied_for_best"]
    assert out["same"]["p_vs_best"] == 1.0 or out["good"]["p_vs_best"] == 1.0
    # 15 points over 10,000 paired items: significant after Holm
    assert out["good"]["beats_baseline"] and out["good"]["p_vs_baseline_holm"] < 0.01
    lo, hi = out["good"]["ci_low"], out["good"]["ci_high"]
    assert lo < point["good"] < hi and hi - lo < 0.05
    # the worse one is not tied for best when it is a candidate
    out2 = summarize(point, reps, candidates=["good", "bad"])
    assert out2["good"]["is_best"] and not out2["bad"]["tied_for_best"]
    assert out2["bad"]["delta_vs_best"] == pytest.approx(point["bad"] - point["good"])


def test_small_difference_is_a_tie():
    rng = np.random.default_rng(1)
    a = (rng.random((3, 200)) < 0.80).astype(float)
    b = a.copy()
    b[0, :2] = 1 - b[0, :2]  # two flipped items out of 600: not significant
    point, reps = bootstrap_per_item({"a": a, "b": b}, n_resamples=1000, seed=0)
    out = summarize(point, reps)
    assert out["a"]["tied_for_best"] and out["b"]["tied_for_best"]


def test_lower_is_better_direction():
    point = {"x": 1.0, "y": 2.0}
    reps = {"x": np.full(100, 1.0) + np.linspace(-.01, .01, 100),
            "y": np.full(100, 2.0) + np.linspace(-.01, .01, 100)}
    out = summarize(point, reps, higher_is_better=False)
    assert out["x"]["is_best"] and not out["y"]["tied_for_best"]


def test_paired_pvalue_bounds():
    assert paired_pvalue(np.zeros(99)) == 1.0
    assert paired_pvalue(np.ones(99)) == pytest.approx(2 / 100)
    with pytest.raises(ValueError):
        paired_pvalue(np.array([]))


def test_summarize_bad_input():
    with pytest.raises(ValueError, match="baseline"):
        summarize({"a": 1.0}, {"a": np.ones(3)}, baseline="z")
    with pytest.raises(ValueError, match="shape"):
        summarize({"a": 1.0, "b": 1.0}, {"a": np.ones(3), "b": np.ones(4)})


def test_friedman_nemenyi_hand_computed(tmp_path):
    # 4 data sets x 3 methods; A always best, C always worst -> ranks 1, 2, 3
    df = pd.DataFrame({"A": [0.9, 0.8, 0.7, 0.95], "B": [0.8, 0.7, 0.6, 0.9],
                       "C": [0.1, 0.2, 0.3, 0.4]})
    r = friedman_nemenyi(df)
    assert r["avg_ranks"] == {"A": 1.0, "B": 2.0, "C": 3.0}
    # Friedman chi2 = 12N/(k(k+1)) * sum R_j^2 - 3N(k+1) = 12*4/12*(1+4+9) - 3*4*4 = 8
    assert r["friedman_stat"] == pytest.approx(8.0)
    # Nemenyi CD for k=3, alpha 0.05: q = 2.343 (Demsar 2006, Table 5), CD = q*sqrt(12/24)
    assert r["cd"] == pytest.approx(2.343 * np.sqrt(3 * 4 / (6 * 4)), abs=2e-3)
    out = plot_cd(r, tmp_path / "cd.png", title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        friedman_nemenyi(df[["A", "B"]])
