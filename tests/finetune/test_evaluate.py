"""Split metrics: an oracle embedding reaches the purity ceiling and mAP 1; TF-IDF tokens."""

import numpy as np
import torch

from contrastlab.finetune.data import make_splits
from contrastlab.finetune.evaluate import average_precision_rows, item_metrics, purity_ceiling, table


def _toy():
    rng = np.random.default_rng(0)
    problems = np.repeat([f"p{i}" for i in range(12)], 9)
    tiers = rng.choice(["PASS", "PARTIAL", "FAIL"], size=len(problems))
    split = make_splits(problems, tiers, test_problem_fraction=0.3, test_fraction=0.3,
                        val_fraction=0.15, seed=0)
    return problems, tiers, split


def test_oracle_embedding_reaches_the_ceiling_and_map_one():
    problems, tiers, split = _toy()
    cells = sorted(set(zip(problems, tiers)))
    emb = torch.zeros(len(problems), len(cells))
    for i, c in enumerate(zip(problems, tiers)):
        emb[i, cells.index(c)] = 1.0
    emb += 1e-4 * torch.randn(emb.shape, generator=torch.Generator().manual_seed(0))
    m = item_metrics(emb, problems, tiers, split, knn_k=[5], rank_k=[1])
    ceil = purity_ceiling(problems, tiers, split, 5)
    np.testing.assert_allclose(m["a"]["knn5_pxt"], ceil["a"])
    np.testing.assert_allclose(m["b"]["knn5_pxt"], ceil["b"])
    assert ceil["a"].mean() < 1.0  # small cells cap kNN@5 purity
    ok = ~np.isnan(m["b"]["ap"])
    np.testing.assert_allclose(m["a"]["ap"], 1.0)
    np.testing.assert_allclose(m["b"]["ap"][ok], 1.0)
    assert np.isnan(m["b"]["ap"][~ok]).all() and (~ok).sum() > 0
    assert m["b"]["probe_tier"].mean() > 0.0


def test_average_precision_by_hand():
    sim = torch.tensor([[0.9, 0.8, 0.7, 0.1]])
    rel = np.array([[False, True, False, True]])
    ap, hit = average_precision_rows(sim, rel, [1, 2])
    np.testing.assert_allclose(ap, [(1 / 2 + 2 / 4) / 2])
    assert hit[1][0] == 0.0 and hit[2][0] == 1.0


def test_table_drops_nan_queries_and_keeps_ci_around_the_mean():
    rng = np.random.default_rng(1)
    a = rng.random((3, 40))
    b = a + 0.2
    a[:, 0] = np.nan
    clusters = np.repeat(np.arange(10), 4)
    t = table({"x": a, "y": b}, clusters, baseline="x", n_resamples=200)
    assert t["x"]["n_items"] == 39
    for v in t.values():
        assert v["ci_low"] <= v["mean"] <= v["ci_high"]
    assert t["y"]["beats_baseline"] and t["y"]["in_mcs"] and not t["x"]["in_mcs"]
