"""Sim-Dis paper ("Similarity-Dissimilarity Loss for Multi-label Supervised Contrastive
Learning"): Figure 1 case analysis (Sec. 2.5), Theorems 1-5, Eq. 17."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from contrastlab.losses.simdis import relation_types, simdis_weights

from . import _refs as R


def _figure1():
    # anchor S = {a, b, c}; |S∩T| = {0,3,1,2,3}, |T\S| = {3,0,2,0,2} for p1..p5 (Sec. 2.5)
    rows = [[0, 1, 2], [3, 4, 5], [0, 1, 2], [0, 6, 7], [0, 1], [0, 1, 2, 7, 8]]
    y = torch.zeros(len(rows), 9)
    for i, r in enumerate(rows):
        y[i, r] = 1
    return y


def test_figure1_case_analysis():
    y = _figure1()
    k = simdis_weights(y)[0, 1:]
    assert torch.allclose(k, torch.tensor([0.0, 1.0, 1 / 9, 2 / 3, 1 / 3]))
    assert torch.allclose(simdis_weights(y, mode="sim_only")[0, 1:], torch.tensor([0.0, 1.0, 1 / 3, 2 / 3, 1.0]))
    assert torch.allclose(simdis_weights(y, mode="dis_only")[0, 1:], torch.tensor([0.0, 1.0, 1 / 3, 1.0, 1 / 3]))
    assert relation_types(y)[0, 1:].tolist() == [1, 2, 3, 4, 5]
    # distinct weights on R2..R5: the loss discriminates the relations (Sec. 2.5)
    assert len(set(k[1:].tolist())) == 4
    e = simdis_weights(y, dissimilarity="exp", alpha=0.5)[0, 1:]
    assert torch.allclose(e, torch.tensor([0.0, 1.0, (1 / 3) * torch.exp(torch.tensor(-1.0)).item(), 2 / 3,
                                           torch.exp(torch.tensor(-1.0)).item()]))


def test_relation_types_empty_sets():
    y = torch.tensor([[1, 0], [0, 0], [1, 1]])
    r = relation_types(y)
    assert r[1].tolist() == [0, 0, 0]  # empty anchor: never an anchor
    assert r[0].tolist() == [2, 1, 5] and r[2].tolist() == [4, 1, 2]
    assert simdis_weights(y)[1].abs().sum() == 0


label_batch = st.integers(0, 10_000).flatmap(
    lambda seed: st.tuples(st.just(seed), st.integers(3, 12), st.integers(1, 7), st.sampled_from([0.3, 0.5, 0.7]))
)


def _labels(seed, n, c, p):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, c, generator=g) < p).long()


@settings(max_examples=40, deadline=None)
@given(label_batch)
def test_theorems_1_to_3_and_bounds(b):
    y = _labels(*b)
    k = simdis_weights(y)
    r = relation_types(y)
    assert ((k >= 0) & (k <= 1)).all()  # Eq. 18
    assert (k[r == 1] == 0).all()  # Theorem 1
    assert torch.allclose(k[r == 2], torch.ones(()))  # Theorem 2
    mid = k[(r >= 3)]
    assert ((mid > 0) & (mid < 1)).all()  # Theorem 3
    # against the plain set definitions (Eq. 14, 15)
    for i in range(y.shape[0]):
        S = R.sets(y[i])
        for j in range(y.shape[0]):
            T = R.sets(y[j])
            want = 0.0 if not S else (lambda ks, kd: ks * kd)(*R.ks_kd(S, T))
            assert abs(k[i, j].item() - want) < 1e-6


@settings(max_examples=40, deadline=None)
@given(label_batch)
def test_theorems_4_and_5(b):
    y = _labels(*b)
    k = simdis_weights(y)
    r = relation_types(y)
    size = y.sum(1)
    extra = [[len(R.sets(y[p]) - R.sets(y[i])) for p in range(len(y))] for i in range(len(y))]
    for i in range(len(y)):
        for p3 in range(len(y)):
            if r[i, p3] != 3:
                continue
            for q in range(len(y)):
                if r[i, q] == 4 and size[q] == size[p3]:  # Theorem 4
                    assert k[i, q] > k[i, p3]
                if r[i, q] == 5 and extra[i][q] <= extra[i][p3]:  # Theorem 5
                    assert k[i, q] > k[i, p3]


def test_theorems_4_5_on_constructed_sets():
    # Theorem 4: |T3| = |T4|; Theorem 5: |T5 \ S| <= |T3 \ S|
    y = torch.zeros(4, 6)
    y[0, [0, 1, 2]] = 1  # anchor
    y[1, [0, 3]] = 1  # R3, |T| = 2, extra 1
    y[2, [0, 1]] = 1  # R4, |T| = 2
    y[3, [0, 1, 2, 4]] = 1  # R5, extra 1
    k = simdis_weights(y)[0]
    assert relation_types(y)[0, 1:].tolist() == [3, 4, 5]
    assert k[2] > k[1] and k[3] > k[1]


def test_eq17_single_class_sets_give_unit_factor():
    y = torch.nn.functional.one_hot(torch.tensor([0, 1, 0, 2, 2]), 3)
    k = simdis_weights(y)
    same = (y @ y.T) > 0
    assert torch.equal(k[same], torch.ones(int(same.sum()))) and (k[~same] == 0).all()
