"""contrastlab.evaluation.stats against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from contrastlab.evaluation.stats import (bootstrap_per_item, friedman_nemenyi, holm,
                                          paired_pvalue, plot_cd, resample_counts, summarize)


def test_holm_hand_made():
    # p = [0.01, 0.04, 0.03, 0.005]; ascending 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1
    # = 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0])  # capped at 1
    assert holm([]).size == 0
    with pytest.raises(ValueError):
        holm([0.1, 1.5])


def test_resample_counts_sizes_and_seed():
    with pytest.raises(ValueError):
        resample_counts(3, 6, clusters=[0, 1], n_resamples=5)
    a = resample_counts(2, 10, n_resamples=3, seed=7)
    b = resample_counts(2, 10, n_resamples=3, seed=7)
    assert len(a) == 3 and (a.items == b.items).all() and (a.seeds == b.seeds).all()


def test_bootstrap_per_item_matches_loop():
    rng = np.random.default_rng(0)
    x = rng.random((3, 40))
    draws = resample_counts(3, 40, n_resamples=20, seed=3)
    point, reps = bootstrap_per_item({"m": x}, draws=draws)
    loop = [ws @ x @ wi / (ws.sum() * wi.sum()) for ws, wi in zip(draws.seeds, draws.items.astype(float))]
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


# --- issue: intervals that contain their estimate, selection-aware ties, distinct methods ---

from contrastlab.evaluation.stats import bias_corrected_interval, model_confidence_set, prob_best  # noqa: E402


def test_bc_interval_removes_the_bias_instead_of_hiding_it():
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    # replicates centred on the estimate: the BC interval is the percentile interval
    reps = rng.normal(0.5, 0.02, 20_001)
    lo, hi = bias_corrected_interval(0.5, reps)
    q = np.quantile(reps, [0.025, 0.975])
    assert lo == pytest.approx(q[0], abs=2e-3) and hi == pytest.approx(q[1], abs=2e-3)
    # replicates biased up by b = 0.01 (half an SE): the interval is centred on point - b,
    # i.e. it moves down by about 2b relative to the percentile interval (Efron & Tibshirani
    # 1993, Eq. 14.10 with a = 0: quantiles Phi(2 z0 -+ 1.96), z0 = -0.5)
    reps = rng.normal(0.51, 0.02, 20_001)
    lo, hi = bias_corrected_interval(0.5, reps)
    assert (lo + hi) / 2 == pytest.approx(0.49, abs=2e-3)
    z0 = norm.ppf(np.mean(reps < 0.5))                 # about -0.5
    assert z0 == pytest.approx(-0.5, abs=0.03)
    assert lo == pytest.approx(np.quantile(reps, norm.cdf(2 * z0 - norm.ppf(0.975))), abs=1e-12)
    assert lo < 0.5 < hi  # |z0| < 1.96: contains the estimate
    # every replicate above the estimate: z0 far below -1.96, the interval misses the estimate
    # (the bootstrap itself says the estimate is off; no shift hides it)
    reps = np.linspace(0.39, 0.47, 1001)
    lo, hi = bias_corrected_interval(0.378, reps)
    assert lo == pytest.approx(0.39) and hi < 0.378 + 0.02
    assert bias_corrected_interval(0.3, np.full(50, 0.3)) == (0.3, 0.3)
    with pytest.raises(ValueError):
        bias_corrected_interval(0.5, np.array([]))
    with pytest.raises(ValueError):
        bias_corrected_interval(0.5, np.array([0.1, np.nan]))


def test_prob_best_counts_draws_and_splits_ties():
    reps = {"a": np.array([1.0, 0.0, 2.0, 1.0]), "b": np.array([0.0, 1.0, 1.0, 1.0])}
    pb = prob_best(reps)
    assert pb == {"a": pytest.approx(2.5 / 4), "b": pytest.approx(1.5 / 4)}
    assert prob_best(reps, higher_is_better=False)["b"] == pytest.approx(2.5 / 4)


def _noisy_methods(means: dict, n_items=800, n_seeds=3, seed=0):
    rng = np.random.default_rng(seed)
    shared = rng.random((n_seeds, n_items))
    per = {k: (shared < m).astype(float) for k, m in means.items()}
    return bootstrap_per_item(per, n_resamples=1000, seed=1)


def test_mcs_keeps_only_a_clear_winner():
    point, reps = _noisy_methods({"good": 0.9, "mid": 0.7, "bad": 0.5})
    m = model_confidence_set(point, reps)
    assert m["good"]["in_mcs"] and not m["mid"]["in_mcs"] and not m["bad"]["in_mcs"]
    assert m["good"]["p_mcs"] == 1.0 and m["bad"]["p_mcs"] < 0.05


def test_mcs_keeps_identical_methods_together():
    point, reps = _noisy_methods({"a": 0.8, "b": 0.8, "c": 0.6})
    m = model_confidence_set(point, reps)
    assert m["a"]["in_mcs"] and m["b"]["in_mcs"] and not m["c"]["in_mcs"]
    # lower is better: the 0.6 method wins alone
    m = model_confidence_set(point, reps, higher_is_better=False)
    assert m["c"]["in_mcs"] and not m["a"]["in_mcs"]


def test_mcs_keeps_near_ties_that_a_test_against_the_winner_would_keep_too():
    rng = np.random.default_rng(3)
    x = rng.random((3, 300))
    per = {"a": (x < 0.80).astype(float), "b": (x < 0.79).astype(float),
           "c": (rng.random((3, 300)) < 0.80).astype(float)}
    point, reps = bootstrap_per_item(per, n_resamples=1000, seed=2)
    m = model_confidence_set(point, reps)
    assert all(v["in_mcs"] for v in m.values())


def test_summarize_lets_baselines_compete_and_marks_both_directions():
    point, reps = _noisy_methods({"loss_good": 0.9, "loss_bad": 0.5, "base": 0.7})
    out = summarize(point, reps, baseline="base")
    assert out["loss_good"]["is_best"] and out["loss_good"]["in_mcs"]
    assert out["loss_good"]["beats_baseline"] and not out["loss_good"]["below_baseline"]
    assert out["loss_bad"]["below_baseline"] and not out["loss_bad"]["beats_baseline"]
    assert "p_best" in out["base"] and out["base"]["tied_for_best"] is False
    assert sum(out[k]["p_best"] for k in point) == pytest.approx(1.0)
    for v in out.values():
        assert v["ci_low"] <= v["mean"] <= v["ci_high"]
    # a baseline that is best is reported as best
    point2, reps2 = _noisy_methods({"loss": 0.6, "base": 0.8})
    out2 = summarize(point2, reps2, baseline="base")
    assert out2["base"]["is_best"] and out2["loss"]["below_baseline"]


def test_resample_counts_draws_n_minus_one_top_level_units():
    draws = resample_counts(5, 12, clusters=[0] * 4 + [1] * 4 + [2] * 4, n_resamples=20, seed=0)
    assert (draws.seeds.sum(1) == 4).all() and (draws.clusters.sum(1) == 2).all()  # 4 of 5, 2 of 3
    assert (resample_counts(1, 3, n_resamples=5).seeds.sum(1) == 1).all()


def test_stratified_metric_reps_defined_paired_and_right():
    from sklearn.metrics import average_precision_score

    from contrastlab.evaluation.multilabel import stratified_metric_reps

    rng = np.random.default_rng(0)
    n, c, s_ = 120, 4, 3
    y = (rng.random((n, c)) < [0.3, 0.2, 0.1, 0.0]).astype(np.int64)
    y[5, 3] = 1                                                 # a label with one positive
    perfect = np.repeat(y[None].astype(float), s_, 0)
    r = stratified_metric_reps(y, perfect, np.full(s_, 0.5), n_resamples=200, seed=0)
    for k in ("map", "micro_f1", "macro_f1"):
        assert np.all(np.isfinite(r[k])) and np.allclose(r[k], 1.0), k  # every label, every draw
    noisy = 1 / (1 + np.exp(-(2.0 * y[None] - 1 + rng.normal(0, 1.5, (s_, n, c)))))
    a = stratified_metric_reps(y, noisy, np.full(s_, 0.5), n_resamples=300, seed=4)
    b = stratified_metric_reps(y, noisy.copy(), np.full(s_, 0.5), n_resamples=300, seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)           # same draws -> paired
    # the mean AP replicate of one label and seed equals a plainly written bootstrap of the
    # same design (positives Binomial(n, p), >= 1, resampled within class) up to MC error
    one = noisy[:1, :, :1]
    reps = stratified_metric_reps(y[:, :1], one, np.array([0.5]), n_resamples=1500, seed=7)["map"]
    pos, neg = np.flatnonzero(y[:, 0]), np.flatnonzero(y[:, 0] == 0)
    ref = []
    for _ in range(1500):
        k = max(1, rng.binomial(n, pos.size / n))
        idx = np.concatenate([rng.choice(pos, k), rng.choice(neg, n - k)])
        ref.append(average_precision_score(y[idx, 0], one[0, idx, 0]))
    assert reps.mean() == pytest.approx(np.mean(ref), abs=4 * np.std(ref) / np.sqrt(1500) + 2e-3)
    assert reps.std() == pytest.approx(np.std(ref), rel=0.12)


# --- issue 35: resolution of the paired tests; vectorised draws ---

def test_draws_for_gives_a_floor_at_most_alpha_over_10():
    from contrastlab.evaluation.stats import draws_for, pvalue_floor

    for m in (1, 2, 7, 12, 13, 24, 26, 40, 100):
        r = draws_for(m, 0.05)
        assert pvalue_floor(r, m) <= 0.005, (m, r)
        assert r % 1000 == 0 and r >= 2000
    assert draws_for(24) == 10_000          # 2 * 24 * 10 / 0.05 - 1 = 9599 -> 10,000
    # the old 1000 draws: 24 rows give the floor 0.048 the issue measured
    assert pvalue_floor(1000, 24) == pytest.approx(0.048, abs=1e-3)
    with pytest.raises(ValueError):
        draws_for(3, alpha=0.0)


def test_a_huge_difference_reaches_the_floor():
    from contrastlab.evaluation.stats import draws_for, pvalue_floor

    rng = np.random.default_rng(0)
    m = 26                                   # 26 tests: 2 * 26 / 1001 > 0.05 with 1000 draws
    truth = rng.random((3, 800))
    per = {f"r{k}": (truth < 0.5 + 0.01 * k).astype(float) for k in range(m)}
    per["base"] = (truth < 0.2).astype(float)
    r = draws_for(m)
    point, reps = bootstrap_per_item(per, n_resamples=r, seed=0)
    out = summarize(point, reps, baseline="base")
    floor = pvalue_floor(r, m)
    for k in range(m):
        e = out[f"r{k}"]
        assert e["p_vs_baseline_holm"] == pytest.approx(floor) and e["beats_baseline"]
        assert e["p_floor"] == pytest.approx(floor) and e["family_size"] == m
    # with 1000 draws the same data can reach only 2 * 26 / 1001 > alpha: nothing significant
    point, reps = bootstrap_per_item(per, n_resamples=1000, seed=0)
    old = summarize(point, reps, baseline="base")
    assert not any(old[f"r{k}"]["beats_baseline"] for k in range(m))
    # issue 55: no normal approximation below the floor; given the per-item scores
    # (redraw) the table draws until the decisions are clear of alpha, and finds them
    again = summarize(point, reps, baseline="base",
                      redraw=lambda r: bootstrap_per_item(per, n_resamples=r, seed=0))
    assert again["r0"]["test"] == "bootstrap" and again["r0"]["n_resamples"] > 1000
    assert all(again[f"r{k}"]["beats_baseline"] for k in range(m))


def test_vectorised_draws_have_the_law_of_the_loop():
    """resample_counts samples multiplicities directly; a plainly written loop of index draws
    (the former resample_indices) must give the same marginals."""
    from contrastlab.evaluation.stats import resample_counts

    S, I, R = 4, 30, 20_000
    new = resample_counts(S, I, n_resamples=R, seed=1)
    rng = np.random.default_rng(2)
    old_s = np.stack([np.bincount(rng.integers(0, S, S - 1), minlength=S) for _ in range(R)])
    old_i = np.stack([np.bincount(rng.integers(0, I, I), minlength=I) for _ in range(R)])
    assert new.seeds.shape == (R, S) and np.all(new.seeds.sum(1) == S - 1)
    assert np.all(new.items.sum(1) == I)
    for a, b, n, k in ((new.seeds, old_s, S - 1, S), (new.items, old_i, I, I)):
        # multinomial(n, 1/k): mean n/k, variance n (1/k)(1 - 1/k), covariance -n/k^2
        for x in (np.asarray(a, float), np.asarray(b, float)):
            assert x.mean(0) == pytest.approx(np.full(k, n / k), abs=5 * np.sqrt(n / k / R))
            assert x.var(0).mean() == pytest.approx(n / k * (1 - 1 / k), rel=0.05)
        # the distribution of one unit's count agrees between the two (counts 0..3)
        fa = [np.mean(np.asarray(a)[:, 0] == c) for c in range(4)]
        fb = [np.mean(np.asarray(b)[:, 0] == c) for c in range(4)]
        np.testing.assert_allclose(fa, fb, atol=0.02)
    # clusters: whole groups, n - 1 of n
    cl = resample_counts(3, 6, clusters=[0, 0, 1, 1, 1, 2], n_resamples=500, seed=0)
    assert cl.clusters.shape == (500, 3) and np.all(cl.clusters.sum(1) == 2)
    np.testing.assert_array_equal(cl.cluster_of, [0, 0, 1, 1, 1, 2])


def test_paired_p_of_a_known_case_matches_a_plain_loop():
    """The vectorised bootstrap (multiplicities, clusters aggregated) against a plain loop over
    index draws, on a clustered case with a modest difference (p well inside (0, 1))."""
    from contrastlab.evaluation.stats import resample_counts

    rng = np.random.default_rng(5)
    S, G = 3, 12
    clusters = np.repeat(np.arange(G), rng.integers(3, 9, G))
    I = clusters.size
    u = rng.normal(0, 0.1, G)[clusters]
    a = (rng.random((S, I)) < 0.6 + u).astype(float)
    b = (rng.random((S, I)) < 0.55 + u).astype(float)
    R = 20_000
    point, reps = bootstrap_per_item({"a": a, "b": b}, clusters=clusters, n_resamples=R, seed=3)
    p_new = paired_pvalue(reps["a"] - reps["b"])
    # exact equality with the multiplicity formula on the same draws, written as a loop
    cnt = resample_counts(S, I, clusters=clusters, n_resamples=50, seed=3)
    _, small = bootstrap_per_item({"a": a}, draws=cnt)
    for r in range(50):
        w = cnt.clusters[r][clusters]
        ref = (cnt.seeds[r] @ a @ w) / (cnt.seeds[r].sum() * w.sum())
        assert small["a"][r] == pytest.approx(ref, rel=1e-12)
    # the same p (up to Monte-Carlo error) from a loop of index draws, as the old code did
    members = [np.flatnonzero(clusters == g) for g in range(G)]
    loop = np.empty(R)
    for r in range(R):
        s = rng.integers(0, S, S - 1)
        i = np.concatenate([members[k] for k in rng.integers(0, G, G - 1)])
        loop[r] = a[np.ix_(s, i)].mean() - b[np.ix_(s, i)].mean()
    p_loop = paired_pvalue(loop)
    assert 0.001 < p_loop < 0.9
    assert p_new == pytest.approx(p_loop, abs=4 * np.sqrt(p_loop * (1 - p_loop) / R) + 0.005)


def test_map_over_frequent_labels_matches_a_per_label_reference():
    """map_min<k> = mean sklearn AP over the labels with >= k test positives, in the metrics
    and in the stratified replicates (equal to map when every label qualifies)."""
    from sklearn.metrics import average_precision_score

    from contrastlab.evaluation.multilabel import (MAP_MIN_POSITIVES, multilabel_metrics,
                                                   stratified_metric_reps)

    rng = np.random.default_rng(3)
    n = 200
    y = np.zeros((n, 4), dtype=np.int64)
    for c, npos in enumerate((2, 6, 15, 60)):                      # 2, 6, 15, 60 positives
        y[rng.choice(n, npos, replace=False), c] = 1
    s = 1 / (1 + np.exp(-(1.2 * y - 0.5 + rng.normal(0, 1, y.shape))))
    m = multilabel_metrics(y, s)
    for k in MAP_MIN_POSITIVES:
        keep = [c for c in range(4) if y[:, c].sum() >= k]
        ref = np.mean([average_precision_score(y[:, c], s[:, c]) for c in keep]) if keep else None
        if ref is None:
            assert f"map_min{k}" not in m
        else:
            assert m[f"map_min{k}"] == pytest.approx(ref) and m[f"map_min{k}_labels"] == len(keep)
    r = stratified_metric_reps(y, s[None], np.array([0.5]), n_resamples=50, seed=0)
    assert np.all(np.isfinite(r["map_min5"])) and not np.allclose(r["map_min5"], r["map"])
    y2 = y[:, 2:]
    r2 = stratified_metric_reps(y2, s[None, :, 2:], np.array([0.5]), n_resamples=50, seed=0)
    np.testing.assert_allclose(r2["map_min10"], r2["map"])    # both labels have >= 10


def test_accuracy_summary_is_the_seed_and_item_mean_with_its_interval():
    from contrastlab.evaluation.stats import accuracy_summary

    rng = np.random.default_rng(0)
    correct = (rng.random((3, 200)) < 0.8).astype(float)
    s = accuracy_summary(correct)
    assert set(s) == {"logreg_acc_mean", "logreg_acc_ci_low", "logreg_acc_ci_high"}
    assert s["logreg_acc_mean"] == pytest.approx(correct.mean())
    assert s["logreg_acc_ci_low"] < s["logreg_acc_mean"] < s["logreg_acc_ci_high"]
    assert 0.02 < s["logreg_acc_ci_high"] - s["logreg_acc_ci_low"] < 0.25  # seeds and items resampled
    assert accuracy_summary(correct, "acc")["acc_mean"] == s["logreg_acc_mean"]
