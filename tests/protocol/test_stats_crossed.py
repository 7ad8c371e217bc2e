"""The two-level bootstrap with the seed x item interaction counted once
(:mod:`contrastlab.evaluation.stats_crossed`), against the variance of the estimate derived by
hand for ``x_si = a_s + b_i + c_si`` and against the plain law where they must agree."""

from __future__ import annotations

import numpy as np
import pytest

from contrastlab.evaluation.coverage import coverage, sim_clustered
from contrastlab.evaluation.stats import bootstrap_per_item, resample_counts
from contrastlab.evaluation.stats_crossed import (bootstrap_per_item_crossed, crossed_reps,
                                                  interaction_variance)


def _crossed(rng, n_s, n_i, sa, sb, sc):
    """One ``[S, I]`` table of ``a_s + b_i + c_si`` (normal effects, SDs sa, sb, sc)."""
    return (rng.normal(0, sa, (n_s, 1)) + rng.normal(0, sb, (1, n_i))
            + rng.normal(0, sc, (n_s, n_i)))


@pytest.mark.parametrize("sa,sb,sc", [(0.0, 0.5, 1.0), (0.05, 0.2, 1.0), (0.05, 1.0, 0.0)])
def test_replicate_variance_is_the_estimates_variance(sa, sb, sc):
    """Averaged over 60 tables, the crossed replicates' variance equals
    sa^2/S + sb^2/I + sc^2/(SI) within 12 %; the plain two-level bootstrap exceeds it by about
    2 sc^2/(SI) (the interaction once through the items, and doubled through the seeds on a
    draw that duplicates items)."""
    n_s, n_i = 5, 300
    truth = sa**2 / n_s + sb**2 / n_i + sc**2 / (n_s * n_i)
    rng = np.random.default_rng(0)
    v_cross, v_plain, v_c = [], [], []
    for t in range(60):
        x = _crossed(rng, n_s, n_i, sa, sb, sc)
        draws = resample_counts(n_s, n_i, n_resamples=1500, seed=t)
        v_cross.append(bootstrap_per_item_crossed({"m": x}, draws=draws)[1]["m"].var())
        v_plain.append(bootstrap_per_item({"m": x}, draws=draws)[1]["m"].var())
        per_draw = (draws.items.astype(float) @ x.T) / n_i
        v_c.append(interaction_variance(per_draw))
    assert np.mean(v_cross) == pytest.approx(truth, rel=0.12)
    assert np.mean(v_c) == pytest.approx(sc**2 / n_i, rel=0.12, abs=1e-6)
    if sc > 0:
        assert np.mean(v_plain) == pytest.approx(truth + 2 * sc**2 / (n_s * n_i), rel=0.12)
        assert np.mean(v_plain) > 1.4 * np.mean(v_cross)
    else:  # no interaction: the two laws agree
        assert np.mean(v_plain) == pytest.approx(np.mean(v_cross), rel=0.12)


def test_hand_made_case_and_edges():
    """Hand-made [R=4, S=2] case: item part = row means; seed part = (drawn seed's point -
    mean of points) x lambda, with lambda^2 = (s^2 - V_c) / s^2 computed by hand."""
    m = np.array([[0.5, 0.7], [0.6, 0.6], [0.4, 0.8], [0.55, 0.65]])
    pts = np.array([0.5, 0.7])
    idx = np.array([[0], [1], [1], [0]])                   # S - 1 = 1 seed drawn per row
    v_seed = m.var(0, ddof=1).mean()
    v_mean = m.mean(1).var(ddof=1)
    v_c = max(0.0, (v_seed - v_mean) * 2)
    s2 = pts.var(ddof=1)
    lam = np.sqrt(max(0.0, s2 - v_c) / s2)
    want = m.mean(1) + lam * (pts[idx[:, 0]] - pts.mean())
    got, info = crossed_reps(m, pts, idx)
    np.testing.assert_allclose(got, want)
    assert info["v_interaction"] == pytest.approx(v_c)
    assert info["shrink"] == pytest.approx(lam)
    # the same draws as multiplicities give the same replicates
    w = np.stack([np.bincount(r, minlength=2) for r in idx]).astype(float)
    np.testing.assert_allclose(crossed_reps(m, pts, w)[0], want)
    # one seed: the item bootstrap alone, equal to the plain law
    x = np.random.default_rng(1).random((1, 40))
    d = resample_counts(1, 40, n_resamples=200, seed=3)
    np.testing.assert_allclose(bootstrap_per_item_crossed({"m": x}, draws=d)[1]["m"],
                               bootstrap_per_item({"m": x}, draws=d)[1]["m"])
    # seeds whose outputs coincide (a deterministic model repeated): no seed part
    same = np.repeat(x, 3, 0)
    d3 = resample_counts(3, 40, n_resamples=200, seed=3)
    np.testing.assert_allclose(bootstrap_per_item_crossed({"m": same}, draws=d3)[1]["m"],
                               (d3.items.astype(float) @ x[0]) / 40)
    with pytest.raises(ValueError, match="disagree"):
        crossed_reps(m, pts[:1], idx)
    with pytest.raises(ValueError, match="outside"):
        crossed_reps(m, pts, idx + 5)
    with pytest.raises(ValueError, match="columns"):
        crossed_reps(m, pts, np.ones((4, 3)))


def test_paired_differences_stay_paired():
    """Two methods on the same draws: the replicate of a method minus itself is zero, and a
    method shifted by a constant on every item differs from the original by that constant in
    every draw (the item parts are paired draw by draw)."""
    rng = np.random.default_rng(2)
    x = _crossed(rng, 3, 80, 0.1, 0.3, 0.5)
    g = np.repeat(np.arange(20), 4)
    _, reps = bootstrap_per_item_crossed({"a": x, "b": x + 0.25}, clusters=g, n_resamples=300)
    np.testing.assert_allclose(reps["b"] - reps["a"], 0.25)


def test_crossed_cluster_bootstrap_covers_where_the_plain_one_over_covers():
    """Fine-tuning split (a)'s shape (273 queries in 115 problems, 3 seeds) with a hit rate
    whose seed effect is small: the plain two-level law over-covers (> 0.975), the crossed one
    is within [0.92, 0.98]."""
    rng = np.random.default_rng(4)
    sizes = rng.multinomial(273 - 115, np.full(115, 1 / 115)) + 1
    kw = dict(sizes=sizes, n_seeds=3, link=0.3, sigma=1.0, tau=0.05, binary=True,
              n_resamples=400)
    plain = coverage(sim_clustered, 300, seed=6, **kw)["value.coverage"]
    crossed = coverage(sim_clustered, 300, seed=6, crossed=True, **kw)["value.coverage"]
    assert plain > 0.975, plain
    assert 0.92 <= crossed <= 0.98, crossed


def test_seed_score_correlation_measures_the_shared_noise():
    """Scores logit = 2 y + sqrt(rho) z_row + sqrt(1 - rho) e_seed,row: the measure returns
    rho (within 0.05 at 3,000 rows); identical seeds give 1; one seed gives None."""
    from contrastlab.errors import InputError
    from contrastlab.evaluation.multilabel import seed_score_correlation

    rng = np.random.default_rng(5)
    y = (rng.random((3000, 4)) < [0.1, 0.3, 0.5, 0.02]).astype(int)
    for rho in (0.0, 0.6, 0.9):
        z = 2 * y[None] + np.sqrt(rho) * rng.normal(size=(1, 3000, 4)) \
            + np.sqrt(1 - rho) * rng.normal(size=(4, 3000, 4))
        assert seed_score_correlation(y, 1 / (1 + np.exp(-z))) == pytest.approx(rho, abs=0.05)
    p = 1 / (1 + np.exp(-rng.normal(size=(1, 3000, 4))))
    assert seed_score_correlation(y, np.repeat(p, 3, 0)) == pytest.approx(1.0)
    assert seed_score_correlation(y, p) is None
    with pytest.raises(InputError, match="expected"):
        seed_score_correlation(y[:, :2], np.repeat(p, 3, 0))
