"""Metrics against hand computations; schedule; training determinism and worker invariance."""

import math

import numpy as np
import pytest
import torch

from contrastlab.evaluation.multilabel import knn_label_purity, multilabel_metrics, precision_at_k
from contrastlab.training.multilabel import TrainConfig, run_seed, run_seeds, summarize, warmup_cosine


def test_metrics_hand_computed():
    y = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
    s = np.array([[0.9, 0.2, 0.4], [0.1, 0.8, 0.6], [0.7, 0.3, 0.2], [0.6, 0.1, 0.1]])
    m = multilabel_metrics(y, s, threshold=0.5, precision_at=[1, 2])
    # predictions at 0.5: [1,0,0],[0,1,1],[1,0,0],[1,0,0] -> TP=3, FP=2, FN=2
    assert m["micro_f1"] == pytest.approx(2 * 3 / (2 * 3 + 2 + 2))
    # per label F1: L0 tp2 fp1 fn0 -> 0.8; L1 tp1 fp0 fn1 -> 2/3; L2 tp0 fp1 fn1 -> 0
    assert m["macro_f1"] == pytest.approx((0.8 + 2 / 3 + 0) / 3)
    # AP per label: L0 ranks .9(+) .7(+) .6 .1 -> 1; L1 .8(+) .3(+) ... -> 1; L2 .6 .4(+) -> 0.5
    assert m["map"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert m["p_at_1"] == pytest.approx((1 + 1 + 1 + 0) / 4)
    assert m["p_at_2"] == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    assert precision_at_k(y, s, 3) == pytest.approx((2 + 1 + 2 + 0) / 12)


def test_metrics_errors():
    with pytest.raises(ValueError, match="y_true"):
        multilabel_metrics(np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="no label has a positive"):
        multilabel_metrics(np.zeros((2, 3)), np.zeros((2, 3)))


def test_knn_purity():
    tr = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], dtype=np.float32)
    g = np.array([0, 0, 1, 1])
    te = np.array([[1, 0.05], [0.05, 1]], dtype=np.float32)
    assert knn_label_purity(tr, g, te, np.array([0, 1]), k=2) == 1.0
    assert knn_label_purity(tr, g, te, np.array([1, 1]), k=2) == 0.5
    assert knn_label_purity(tr, g, te, np.array([0, 1]), k=4) == 0.5


def test_warmup_cosine():
    f = warmup_cosine(100, 0.05)
    assert f(0) == pytest.approx(0.2) and f(4) == pytest.approx(1.0)
    assert f(5) == pytest.approx(1.0)
    assert f(5 + 95 // 2) == pytest.approx(0.5 * (1 + math.cos(math.pi * 47 / 95)))
    assert f(99) < 0.01


def _toy(seed=0, n=96, c=4, d=10):
    g = np.random.default_rng(seed)
    y = (g.random((n + 48, c)) < 0.4).astype(np.uint8)
    y[y.sum(1) == 0, 0] = 1
    w = g.normal(size=(c, d))
    x = (y @ w + 0.5 * g.normal(size=(n + 48, d))).astype(np.float32)
    return {"x_train": x[:n], "y_train": y[:n], "x_test": x[n:], "y_test": y[n:]}


@pytest.mark.parametrize("loss", ["bce", "any", "simdis"])
def test_run_seed_deterministic_and_learns(loss):
    data = _toy(n=192)
    cfg = TrainConfig(loss=loss, hidden=[32], enc_dim=32, proj_dim=16, batch_size=64, epochs=20, clf_epochs=40,
                      lr=3e-3, clf_lr=2e-2, dropout=0.0)
    a = run_seed(data, cfg, 0)
    b = run_seed(data, cfg, 0)
    assert a.metrics == b.metrics and a.history == b.history
    assert len(a.history) == 20 and all(np.isfinite(a.history))
    assert a.metrics["micro_f1"] > 0.75 and a.metrics["map"] > 0.9  # near-separable toy data
    assert a.history[-1] < a.history[0]
    if loss != "bce":
        assert len(a.clf_history) == 40 and a.clf_history[-1] < a.clf_history[0]


@pytest.mark.slow
def test_workers_do_not_change_results():
    data = _toy(1)
    cfg = TrainConfig(loss="mulsupcon", hidden=[16], enc_dim=16, proj_dim=8, batch_size=32, epochs=3, clf_epochs=5)
    r1 = run_seeds(data, cfg, [0, 1, 2], workers=1)
    r2 = run_seeds(data, cfg, [0, 1, 2], workers=2)
    assert [r.metrics for r in r1] == [r.metrics for r in r2]
    s = summarize(r1)
    assert s["n_seeds"] == 3 and s["micro_f1"] == pytest.approx(np.mean([r.metrics["micro_f1"] for r in r1]))
    assert s["micro_f1_std"] == pytest.approx(np.std([r.metrics["micro_f1"] for r in r1], ddof=1))
    assert {"micro_f1_seed0", "macro_f1_seed2", "map_seed1"} <= set(s)


def test_nan_loss_raises():
    from contrastlab.training.multilabel import train_contrastive

    data = _toy()
    cfg = TrainConfig(loss="any", hidden=[8], enc_dim=8, proj_dim=4, batch_size=32, epochs=1)
    with pytest.raises(FloatingPointError, match="any"):
        train_contrastive(torch.tensor(data["x_train"]), torch.tensor(data["y_train"]).float(), cfg,
                          torch.Generator().manual_seed(0), loss_fn=lambda z, y, temperature: z.sum() * float("nan"))
