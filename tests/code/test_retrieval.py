"""Rank@k, MRR and median rank on a hand-made corpus."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from contrastlab.evaluation.retrieval import rank_at_k_curve, rank_metrics, true_ranks
from contrastlab.training.code import mine_hard_negatives, warmup_cosine


def _corpus(n: int = 30) -> torch.Tensor:
    # item j points at angle j degrees in the plane (all distinct, sorted by cosine to e1)
    ang = torch.deg2rad(torch.arange(n, dtype=torch.float64) * 3.0)
    return torch.stack([ang.cos(), ang.sin()], 1).float()


def test_ranks_hand_made():
    c = _corpus()
    q = c[[0]].repeat(4, 1)  # every query sits on item 0: item j has rank j + 1
    true = np.array([0, 4, 9, 25])
    ranks = true_ranks(q, c, true, k_max=10, device="cpu")  # 25 is beyond the FAISS depth
    assert ranks.tolist() == [1, 5, 10, 26]
    ranks = true_ranks(q, c, true, k_max=12, device="cpu")
    m, curve = rank_metrics(ranks), rank_at_k_curve(ranks, 12)
    assert m["rank_at_1"] == pytest.approx(0.25)
    assert m["rank_at_5"] == pytest.approx(0.5)
    assert m["rank_at_10"] == pytest.approx(0.75)
    assert m["mrr"] == pytest.approx((1 + 1 / 5 + 1 / 10 + 1 / 26) / 4)
    assert m["median_rank"] == pytest.approx(7.5)
    assert len(curve) == 12
    assert curve[0] == 0.25 and curve[4] == 0.5 and curve[9] == 0.75 and curve[11] == 0.75
    np.testing.assert_allclose(rank_at_k_curve(np.array([1, 3]), 3), [0.5, 0.5, 1.0])


def test_hard_negatives_exclude_self_and_identical_bodies():
    c = _corpus(10)
    c[3] = c[2]  # rows 2 and 3 are the same body
    h = np.array([f"h{i}" for i in range(10)])
    h[3] = "h2"
    hn = mine_hard_negatives(c, c, h, k=2, device="cpu")
    assert hn[0][0] == 1 and hn[0][1] in (2, 3)  # 2 and 3 tie
    assert 3 not in hn[2] and 2 not in hn[2] and hn[2].tolist() == [1, 4]
    assert (hn != np.arange(10)[:, None]).all()


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 4, 20) == pytest.approx(0.25)
    assert warmup_cosine(3, 4, 20) == pytest.approx(1.0)
    assert warmup_cosine(4, 4, 20) == pytest.approx(1.0)
    assert warmup_cosine(12, 4, 20) == pytest.approx(0.5)
    assert warmup_cosine(20, 4, 20) == pytest.approx(0.0, abs=1e-12)
