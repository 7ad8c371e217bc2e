"""Coverage of every interval procedure the pipeline uses, by simulation.

Each test draws synthetic data sets shaped like a track's test data from a population whose
value is known, runs the track's interval procedure (bootstrap + BC percentile interval),
and requires the nominal 95% interval to cover the population value in 92-98% of them (about
+-2 binomial standard errors around 95% at 200 replications). The full figures at every real
data set's shape: ``python bench/bench_coverage.py`` (``reports/metrics/coverage.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, f1_score

from contrastlab.evaluation.coverage import (coverage, population_accuracy, population_ap,
                                             sim_accuracy, sim_clustered, sim_multilabel,
                                             stratified_reps_fast)

N_REP = 200
ROOT = Path(__file__).resolve().parents[2]
#: the code track's repository-group sizes (39 groups, 1,477 test signatures)
CODE_SIZES = [4, 7, 17, 21, 31, 33, 35, 39] + [40] * 29 + [59, 71]


def _check(cov: dict, key: str) -> None:
    assert 0.92 <= cov[f"{key}.coverage"] <= 0.98, cov


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
    # the graph track's shape: 1000 test nodes with node noise, 10 seeds
    cov = coverage(sim_accuracy, N_REP, seed=1, n_items=1000, n_seeds=10, n_resamples=250)
    _check(cov, "value")
    assert cov["value.contains_estimate"] == 1.0


@pytest.mark.parametrize("binary,link,sigma,sd_item", [(True, -0.15, 0.65, 0.0),
                                                        (False, -1.0, 0.6, 1.5)])
def test_clustered_interval_covers_at_the_code_shape(binary, link, sigma, sd_item):
    # the code track's 39 repository groups, 3 seeds: Rank@10 (hits, mean ~0.46) and MRR
    # (graded, ~0.31), with about the between-group spread and seed-to-seed SD of the committed ranks
    # (bench/bench_coverage.code_shapes). 1000 replications (cheap; +-0.7 points binomial SE):
    # with 39 clusters the graded mean covers about 0.93, a few-cluster shortfall of the
    # cluster bootstrap (Cameron & Miller, J. Human Resources 2015), hence the 0.915 floor
    cov = coverage(sim_clustered, 1000, seed=5, sizes=CODE_SIZES, n_seeds=3, link=link,
                   sigma=sigma, tau=0.03, sd_item=sd_item, binary=binary, n_resamples=400)
    assert 0.915 <= cov["value.coverage"] <= 0.98, cov


def test_fast_stratified_reps_have_the_law_of_the_pipelines():
    """The simulation's stratified bootstrap (stratified_reps_fast) against the pipeline's
    stratified_metric_reps on the same data: equal replicate means and spreads."""
    from contrastlab.evaluation.multilabel import stratified_metric_reps

    rng = np.random.default_rng(0)
    n, c = 150, 5
    y = (rng.random((n, c)) < [0.02, 0.05, 0.1, 0.3, 0.5]).astype(np.int64)
    y[0, 0] = 1
    s = 1 / (1 + np.exp(-(1.5 * y[None] - 0.8 + rng.normal(0, 1, (3, n, c)))))
    # each seed's value on the test set (sklearn, independently of both implementations)
    pred = s >= 0.5
    points = {"map_k1": np.array([np.mean([average_precision_score(y[:, j], s[k, :, j])
                                           for j in range(c)]) for k in range(3)]),
              "micro_f1": np.array([f1_score(y, pred[k], average="micro") for k in range(3)]),
              "macro_f1": np.array([f1_score(y, pred[k], average="macro", zero_division=0)
                                    for k in range(3)])}
    a = stratified_reps_fast(y, s, (0.5,), n_resamples=4000, rng=rng, seed_points=points)
    b = stratified_metric_reps(y, s, np.full(3, 0.5), n_resamples=4000, seed=1)
    plain = stratified_reps_fast(y, s, (0.5,), n_resamples=4000, rng=rng)
    for ka, kb in (("map_k1", "map"), ("micro_f1", "micro_f1"), ("macro_f1", "macro_f1")):
        sd = b[kb].std()
        assert a[ka].mean() == pytest.approx(b[kb].mean(), abs=4 * sd / np.sqrt(2000))
        assert a[ka].std() == pytest.approx(sd, rel=0.08)
        # the scores' noise is drawn afresh per seed (all seed x row interaction): the plain
        # two-level law counts it twice and is wider
        assert plain[ka].std() > 1.1 * sd, (ka, plain[ka].std(), sd)


#: a medical-like split, scaled down: 300 rows, 12 labels at 0.3-30 % prevalence, half of them
#: with about 1-3 expected test positives
RARE = (0.003, 0.003, 0.005, 0.005, 0.01, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3)


@pytest.mark.slow
def test_rare_labels_map_fails_and_map_over_labels_with_enough_positives_covers():
    """Where labels are rare the sample AP of a label with a few positives is biased up and no
    bootstrap interval covers mAP over all labels; mAP over labels with >= 10 test positives
    does here, and micro- and macro-F1 cover within two binomial standard errors of 0.95
    (>= 0.90 at 150 replications). The seeds share 80 % of the score noise, as the real rows
    do (test_score_seed_corr 0.56-1.0 on the real rows; the real sets' k: bench/bench_coverage.py),
    and the replicates are the pipeline's crossed-effects ones."""
    k = 10
    cov = coverage(sim_multilabel, 150, seed=3, n_items=300, n_seeds=5, prevalence=RARE, mu=2.0,
                   min_pos=(1, k), n_resamples=200, rho=0.8)
    assert cov["map_k1.coverage"] < 0.8, cov          # the check can fail
    assert 0.92 <= cov[f"map_k{k}.coverage"] <= 0.99, cov
    for key in ("micro_f1", "macro_f1"):
        assert 0.90 <= cov[f"{key}.coverage"] <= 0.99, cov


def test_committed_coverage_is_complete_and_records_the_operating_point():
    """reports/metrics/coverage.json (bench/bench_coverage.py) has every data set of
    params.yaml and the graph, code and fine-tuning tracks, every value a coverage, and per
    multi-label set the F1 operating point it was simulated at: an F1 has a coverage only
    where its simulated value is within 0.03 of the real median row's, and the two calibrated
    targets (micro- and macro-F1 at the validation threshold) are met. Which intervals the
    report prints (those in [0.92, 0.98]) is tests/protocol/test_coverage_rule.py's check."""
    from contrastlab.params import load_params

    f = ROOT / "reports" / "metrics" / "coverage.json"
    if not f.exists():
        pytest.skip("run python bench/bench_coverage.py")
    cov = json.loads(f.read_text())
    ml = load_params(ROOT / "params.yaml").multilabel.datasets
    sets = {"graph", "code", "finetune", *ml}
    assert sets <= set(cov), sorted(sets - set(cov))
    assert all(0.0 <= c <= 1.0 for s, d in cov.items() if not s.startswith("_") for c in d.values())
    for ds in ml:
        op = cov["_operating_point"][ds]
        gap = {m: abs(op["simulated_mean"][m] - op["real_median_row"][m]) for m in op["simulated_mean"]}
        assert gap["micro_f1_val_t"] <= 0.03 and gap["macro_f1_val_t"] <= 0.03, (ds, op)
        assert all((m in cov[ds]) == (g <= 0.03) for m, g in gap.items()), (ds, gap, cov[ds])


def _bench_coverage():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_coverage", ROOT / "bench" / "bench_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_empirical_delta_redraws_whole_clusters_and_covers_a_paired_difference():
    """The README differences' coverage (bench_coverage.sim_empirical_delta): the population is
    the per-item differences themselves, a replication redraws whole clusters (an item never
    travels without its cluster), the truth is the population mean, and at a clustered paired
    shape (40 groups, 3 seeds, a +0.05 difference) the interval covers 0.92-0.98."""
    bc = _bench_coverage()
    rng = np.random.default_rng(3)
    sizes = rng.integers(10, 60, 40)
    g = np.repeat(np.arange(40), sizes)
    u = rng.normal(0, 0.8, 40)[g]
    a = rng.random((3, g.size)) < 1 / (1 + np.exp(-(0.6 + u + rng.normal(0, 0.1, (3, 1)))))
    b = rng.random(g.size) < 1 / (1 + np.exp(-(0.4 + u)))
    diff = a.astype(float) - b[None].astype(float)
    marker = np.broadcast_to(g.astype(float), diff.shape)  # a cluster's items carry its id
    truth, est, lo, hi = bc.sim_empirical_delta(np.random.default_rng(0), diff=marker, clusters=g,
                                                 n_resamples=50)
    assert truth == pytest.approx(marker.mean())
    drawn = bc.sim_empirical_delta  # whole clusters: redo the draw and count each id's items
    rng2 = np.random.default_rng(0)
    pick = rng2.integers(0, 40, 40)
    assert est == pytest.approx(np.concatenate([np.full(sizes[k], k) for k in pick]).mean())
    cov = coverage(drawn, N_REP, seed=1, diff=diff, clusters=g, n_resamples=400)
    _check(cov, "value")
    assert cov["value.truth"] == pytest.approx(diff.mean())


def test_docs_state_the_committed_coverage_of_the_readme_differences():
    """docs/statistics.md's numbers for the README's differences are coverage.json's."""
    import re

    cov = json.loads((ROOT / "reports" / "metrics" / "coverage.json").read_text()).get("delta")
    if cov is None:
        pytest.skip("no delta entry: run python bench/bench_coverage.py --only delta")
    text = (ROOT / "docs" / "statistics.md").read_text()
    m = re.search(r"code, 2 CPU cores (\S+); code, GPU (\S+); fine-tuning (\S+) \(.*?\); graph (\S+); "
                  r"code, CPU-budget preset (\S+)\.", " ".join(text.split()))
    assert m, "docs/statistics.md no longer states the README differences' coverage"
    stated = [float(x) for x in m.groups()]
    assert stated == pytest.approx([cov["code"], cov["code_secondary"], cov["finetune"], cov["graph"],
                                    cov["code_more1"]], abs=5e-4)
