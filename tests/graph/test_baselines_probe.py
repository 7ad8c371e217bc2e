"""SGC propagation (Wu et al. 2019, Eq. 5-8), the probe's interior-C rule and the default
choices of a study (trial 0)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from contrastlab.errors import InputError
from contrastlab.evaluation.graph_baselines import select_on_validation
from contrastlab.evaluation.probe import logreg_probe, row_normalize
from contrastlab.training.graph import (GraphRunConfig, default_choices, propagate_features,
                                        sgc_operator)


def _path3_operator() -> np.ndarray:
    """S for the path 0 - 1 - 2 by hand: A + I has degrees 2, 3, 2."""
    r6 = 1.0 / math.sqrt(6.0)
    return np.array([[1 / 2, r6, 0.0],
                     [r6, 1 / 3, r6],
                     [0.0, r6, 1 / 2]])


def test_sgc_operator_on_a_path_by_hand():
    # one direction only, a duplicate edge and an existing self-loop: S is the same
    ei = torch.tensor([[0, 1, 1, 2], [1, 2, 2, 2]])
    s = sgc_operator(ei, 3).to_dense().numpy()
    np.testing.assert_allclose(s, _path3_operator(), atol=1e-12)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_propagate_features_equals_hand_computed_power(k):
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    want = np.linalg.matrix_power(_path3_operator(), k) @ x.numpy()
    got = propagate_features(x.to_sparse_coo(), ei, k)
    assert got.dtype == torch.float64 and got.shape == (3, 2)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)


def test_propagate_features_four_nodes_with_isolated_node():
    # star 0-1, 0-2 plus isolated node 3: degrees of A + I are 3, 2, 2, 1
    ei = torch.tensor([[0, 0], [1, 2]])
    x = torch.eye(4)
    s = propagate_features(x, ei, 1).numpy()
    a = 1 / math.sqrt(6.0)
    want = np.array([[1 / 3, a, a, 0], [a, 1 / 2, 0, 0], [a, 0, 1 / 2, 0], [0, 0, 0, 1]])
    np.testing.assert_allclose(s, want, atol=1e-12)


def test_propagate_features_errors():
    with pytest.raises(InputError, match="k must be"):
        propagate_features(torch.eye(2), torch.tensor([[0], [1]]), -1)
    with pytest.raises(InputError, match="outside"):
        sgc_operator(torch.tensor([[0], [5]]), 3)
    with pytest.raises(InputError, match=r"\[2, E\]"):
        sgc_operator(torch.tensor([0, 1]), 3)


def test_row_normalize():
    x = np.array([[1.0, 3.0], [0.0, 0.0]])
    np.testing.assert_allclose(row_normalize(x), [[0.25, 0.75], [0.0, 0.0]])


def _blobs(seed=0, n=240, sep=1.5):
    """Three Gaussian classes, 60% in class 0: a heavily regularised probe predicts class 0
    (accuracy rises with C until it overfits)."""
    rng = np.random.default_rng(seed)
    y = rng.choice(3, n, p=[0.6, 0.2, 0.2])
    x = rng.normal(size=(n, 6))
    x[np.arange(n), y] += sep
    m = np.zeros((3, n), bool)
    m[0, :60], m[1, 60:150], m[2, 150:] = True, True, True
    return x, y, m


def test_probe_rejects_or_extends_a_c_at_the_grid_edge():
    x, y, m = _blobs()
    # a grid of strong regularisation only: the best C is its upper end
    grid = [1e-3, 3e-3, 1e-2]
    full = logreg_probe(x, y, *m, c_grid=[1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1e3],
                        normalize="none")
    assert full["C"] not in (1e-4, 1e3) and 0.5 < full["val_acc"]
    with pytest.raises(InputError, match="end of the grid"):
        logreg_probe(x, y, *m, c_grid=grid, normalize="none", edge="raise")
    with pytest.raises(InputError, match="end of the grid"):
        logreg_probe(x, y, *m, c_grid=grid, normalize="none", max_extend=1)
    ext = logreg_probe(x, y, *m, c_grid=grid, normalize="none", max_extend=20)
    g = ext["c_grid"]
    assert len(g) > len(grid) and g[0] == grid[0] and g[-1] > grid[-1]
    assert g[0] < ext["C"] < g[-1]  # interior after extending
    assert ext["val_acc"] >= full["val_acc"] - 0.05


def test_probe_prefers_an_interior_c_on_a_tie():
    x, y, m = _blobs(1)
    r = logreg_probe(x, y, *m, c_grid=[1e-7, 1e-6, 1e-5, 1e-4], normalize="none",
                     criterion="accuracy")
    # every fit predicts the majority class: the tie includes the lower end and is
    # resolved inside the grid (the smaller interior C), without extending it
    assert r["C"] == 1e-6 and r["c_grid"] == [1e-7, 1e-6, 1e-5, 1e-4]


def test_default_choices_read_the_declared_values():
    cfg = GraphRunConfig("ntxent", {"temperature": 0.4},
                         {"lr": 1e-3, "feature_mask": [0.3, 0.4], "edge_drop": [0.2, 0.1]})
    space = {"temperature": None, "lr": None, "feature_mask.1": None, "edge_drop.0": None}
    assert default_choices(cfg, space) == {"temperature": 0.4, "lr": 1e-3,
                                           "feature_mask.1": 0.4, "edge_drop.0": 0.2}
    with pytest.raises(KeyError):
        default_choices(cfg, {"momentum": None})


def _val_correct(x, y, m, c: float) -> int:
    """Validation points a plain scikit-learn fit at ``C = c`` gets right (no normalisation)."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=c, max_iter=2000).fit(x[m[0]], y[m[0]])
    return int((clf.predict(x[m[1]]) == y[m[1]]).sum())


def test_the_probe_records_its_c_and_margin_against_independent_fits():
    x, y, m = _blobs()
    r = logreg_probe(x, y, *m, c_grid=[1e-3, 1e-2, 0.1, 1.0, 10.0], normalize="none",
                     criterion="accuracy")
    counts = [_val_correct(x, y, m, c) for c in r["c_grid"]]
    assert r["val_correct"] == counts and r["val_acc"] == counts[r["c_grid"].index(r["C"])] / 90
    assert r["val_score"] == [k / 90 for k in counts]  # the criterion per C, higher is better
    p = r["pick"]
    assert p["chosen"] == r["C"] and p["n_val"] == 90
    others = [k for c, k in zip(r["c_grid"], counts) if c != r["C"]]
    assert p["margin"] == max(counts) - max(others)
    assert counts[r["c_grid"].index(p["runner_up"])] == max(others)


def test_the_baselines_pick_is_over_every_feature_set_normalisation_and_c():
    x, y, m = _blobs(1)
    feats = {1: x * 0.0 + np.random.default_rng(2).normal(size=x.shape), 2: x}  # noise, signal
    probe = dict(c_grid=[1e-2, 0.1, 1.0, 10.0], edge="extend", max_extend=4, criterion="accuracy")
    r, (key, norm), pick = select_on_validation(feats, (y, *m), probe, ["none"])
    assert key == 2 and pick["chosen"] == [2, "none", r["C"]]
    every = {(k, c): _val_correct(f, y, m, c) for k, f in feats.items()
             for c in logreg_probe(f, y, *m, normalize="none", **probe)["c_grid"]}
    best = every[(2, r["C"])]
    assert best == max(every.values())
    assert pick["margin"] == best - max(v for kc, v in every.items() if kc != (2, r["C"]))


def _val_nll(x, y, m, c: float) -> np.ndarray:
    """Each validation point's cross-entropy under a plain scikit-learn fit at ``C = c``."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=c, max_iter=2000).fit(x[m[0]], y[m[0]])
    p = clf.predict_proba(x[m[1]])
    return -np.log(p[np.arange(int(m[1].sum())), np.searchsorted(clf.classes_, y[m[1]])])


def test_the_log_loss_probe_keeps_the_c_of_lowest_validation_cross_entropy():
    from sklearn.metrics import log_loss

    x, y, m = _blobs()
    r = logreg_probe(x, y, *m, c_grid=[1e-3, 1e-2, 0.1, 1.0, 10.0], normalize="none")
    assert r["pick"]["criterion"] == "validation log-loss"
    ref = []
    for c in r["c_grid"]:
        from sklearn.linear_model import LogisticRegression

        clf = LogisticRegression(C=c, max_iter=2000).fit(x[m[0]], y[m[0]])
        ref.append(log_loss(y[m[1]], clf.predict_proba(x[m[1]]), labels=clf.classes_))
    np.testing.assert_allclose(r["val_log_loss"], ref, rtol=1e-9)
    np.testing.assert_allclose(r["val_score"], -np.asarray(ref), rtol=1e-9)
    assert r["C"] == r["c_grid"][int(np.argmin(ref))] == r["pick"]["chosen"]
    # the accuracy at the chosen C is still reported, counted independently
    assert r["val_acc"] == _val_correct(x, y, m, r["C"]) / 90
    # the accuracy rule may pick another C; both rules see the same fits
    acc = logreg_probe(x, y, *m, c_grid=[1e-3, 1e-2, 0.1, 1.0, 10.0], normalize="none",
                       criterion="accuracy")
    assert acc["val_correct"] == r["val_correct"]
    with pytest.raises(InputError, match="criterion"):
        logreg_probe(x, y, *m, normalize="none", criterion="f1")


def _removals_to_flip(nll: np.ndarray, pick: int) -> int:
    """Brute force: the fewest validation points whose removal lets some other C reach the
    picked C's mean cross-entropy (every subset, smallest first)."""
    from itertools import combinations

    n = nll.shape[1]
    for k in range(0, n):
        for drop in combinations(range(n), k):
            keep = np.setdiff1d(np.arange(n), drop)
            means = nll[:, keep].mean(1)
            if any(means[a] <= means[pick] + 1e-12 for a in range(len(means)) if a != pick):
                return k
    return n


def test_the_log_loss_margin_is_the_fewest_nodes_whose_removal_flips_the_pick():
    rng = np.random.default_rng(5)
    n = 150
    y = rng.choice(3, n)
    x = rng.normal(size=(n, 4))
    x[np.arange(n), y] += 0.8
    m = np.zeros((3, n), bool)
    m[0, :126], m[1, 126:138], m[2, 138:] = True, True, True   # 12 validation points
    margins = []
    for grid in ([0.01, 0.1, 1.0, 10.0], [0.03, 0.3, 3.0]):
        r = logreg_probe(x, y, *m, c_grid=grid, normalize="none", max_extend=10)
        nll = np.stack([_val_nll(x, y, m, c) for c in r["c_grid"]])
        np.testing.assert_allclose(r["val_nll"], nll, rtol=1e-9, atol=1e-12)
        i = r["c_grid"].index(r["C"])
        assert r["pick"]["margin"] == _removals_to_flip(nll, i)
        assert r["pick"]["n_val"] == 12
        margins.append(r["pick"]["margin"])
    assert max(margins) > 0  # a case the removal count can get wrong


def test_the_baselines_log_loss_pick_is_the_lowest_over_every_candidate():
    x, y, m = _blobs(1)
    feats = {1: x + 3 * np.random.default_rng(2).normal(size=x.shape), 2: x}  # weak, strong
    probe = dict(c_grid=[1e-2, 0.1, 1.0, 10.0], edge="extend", max_extend=4, criterion="log_loss")
    r, (key, norm), pick = select_on_validation(feats, (y, *m), probe, ["none", "standard"])
    every = {}
    for k, f in feats.items():
        for nm in ("none", "standard"):
            rr = logreg_probe(f, y, *m, normalize=nm, **probe)
            every.update({(k, nm, c): v for c, v in zip(rr["c_grid"], rr["val_log_loss"])})
    best = min(every, key=every.get)
    assert (key, norm, r["C"]) == best and pick["chosen"] == list(best)
    assert pick["criterion"] == "validation log-loss" and pick["runner_up"] != list(best)
    assert every[tuple(pick["runner_up"])] > every[best]
    assert 0 <= pick["margin"] <= 90
