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
    m = n + 48 + 48
    y = (g.random((m, c)) < 0.4).astype(np.uint8)
    y[y.sum(1) == 0, 0] = 1
    w = g.normal(size=(c, d))
    x = (y @ w + 0.5 * g.normal(size=(m, d))).astype(np.float32)
    return {"x_train": x[:n], "y_train": y[:n], "x_val": x[n:n + 48], "y_val": y[n:n + 48],
            "x_test": x[n + 48:], "y_test": y[n + 48:]}


@pytest.mark.parametrize("variant", ["bce", "any", "simdis", "logreg"])
def test_run_seed_deterministic_and_learns(variant):
    data = _toy(n=192)
    loss = {"bce": None, "logreg": None, "any": "any", "simdis": "simdis"}[variant]
    cfg = TrainConfig(variant=variant, loss=loss, loss_kwargs={"weighting": "log_prob"} if loss == "simdis" else {},
                      hidden=[32], enc_dim=32, proj_dim=16, batch_size=64, max_steps=150, eval_every=10,
                      patience=100, lr=3e-3, dropout=0.0, mask_rate=0.2, per_label_thresholds=True)
    a = run_seed(data, cfg, 0)
    b = run_seed(data, cfg, 0)
    assert a.metrics == b.metrics and a.curve == b.curve
    assert a.metrics["micro_f1"] > 0.75 and a.metrics["map"] > 0.9  # near-separable toy data
    assert 0.05 <= a.metrics["threshold_val"] <= 0.95 and "macro_f1_label_t" in a.metrics
    assert a.scores.shape == data["y_test"].shape
    if variant != "logreg":
        assert a.curve["step"] == list(range(10, 151, 10)) and all(np.isfinite(a.curve["loss"]))
        assert np.mean(a.curve["loss"][-3:]) < a.curve["loss"][0]
        assert max(a.curve["val_map"]) > a.curve["val_map"][0] - 1e-9
    else:
        assert a.curve["C"] == cfg.logreg_c and a.chosen["C"] in cfg.logreg_c


def test_early_stopping_stops_and_keeps_best():
    data = _toy(n=192)
    cfg = TrainConfig(variant="any", loss="any", hidden=[16], enc_dim=16, proj_dim=8, batch_size=64,
                      max_steps=2000, eval_every=5, patience=2, lr=3e-3, dropout=0.0)
    r = run_seed(data, cfg, 0)
    assert r.curve["step"][-1] < 2000  # stopped by patience
    best = int(np.argmax(r.curve["val_map"]))
    assert len(r.curve["step"]) - 1 - best == 2 and r.chosen["best_step"] == r.curve["step"][best]


def test_mask_views_rate_and_independence():
    from contrastlab.training.multilabel import mask_views

    x = torch.ones(400, 50)
    v = mask_views(x, 0.3, torch.Generator().manual_seed(0))
    assert v.shape == (400, 2, 50)
    assert abs(float((v == 0).float().mean()) - 0.3) < 0.02
    assert not torch.equal(v[:, 0], v[:, 1])
    assert torch.equal(mask_views(x, 0.0, torch.Generator())[:, 1], x)


def test_queue_rows_enter_denominator_and_are_never_anchors():
    """With a queue, the loss equals a per-anchor reference whose anchors are the batch rows
    only and whose denominators/positives include the queued rows."""
    import math as m

    from contrastlab.losses.multilabel import any_loss
    from contrastlab.training.multilabel import MemoryQueue

    g = torch.Generator().manual_seed(0)
    q = MemoryQueue(5)
    old = torch.nn.functional.normalize(torch.randn(4, 2, 3, generator=g), dim=-1)
    yold = torch.tensor([[1, 0], [0, 1], [1, 1], [0, 1]], dtype=torch.float32)
    q.push(old[:2], yold[:2])
    q.push(old[2:], yold[2:])
    assert len(q) == 4 and torch.equal(q.labels[:2], yold[2:])  # newest first
    z = torch.nn.functional.normalize(torch.randn(3, 2, 3, generator=g), dim=-1)
    y = torch.tensor([[1, 0], [0, 1], [1, 0]], dtype=torch.float32)
    cf, cl = q.contrast(z, y)
    got = float(any_loss(z, y, temperature=0.5, contrast_features=cf, contrast_labels=cl))
    rows = cf.reshape(-1, 3)
    lab = cl.repeat_interleave(2, dim=0)
    terms = []
    for i in range(3 * 2):  # anchors: the batch's 6 view rows only
        others = [a for a in range(len(rows)) if a != i]
        den = sum(m.exp(float(rows[i] @ rows[a]) / 0.5) for a in others)
        pos = [p for p in others if float(lab[i] @ lab[p]) > 0]
        terms.append(-sum(float(rows[i] @ rows[p]) / 0.5 - m.log(den) for p in pos) / len(pos))
    assert got == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    # without the queue the value differs: the queued rows did enter the sums
    assert abs(float(any_loss(z, y, temperature=0.5)) - got) > 1e-3
    q.push(z, y)
    assert len(q) == 5  # capped at the queue size


def test_thresholds():
    from contrastlab.evaluation.multilabel import choose_threshold, label_thresholds

    y = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    s = np.array([[0.3, 0.1], [0.35, 0.6], [0.1, 0.7], [0.2, 0.2]])
    # 0.25 and 0.3 both separate perfectly; averaged with its grid neighbours 0.3 is ahead
    # (criterion at 0.2: 0.733, at 0.35: 0.845), so the plateau's rule takes 0.3
    assert choose_threshold(y, s) == pytest.approx(0.3)
    np.testing.assert_allclose(label_thresholds(y, s), [0.25, 0.25])


@pytest.mark.slow
def test_workers_do_not_change_results():
    data = _toy(1)
    cfg = TrainConfig(variant="mulsupcon", loss="mulsupcon", hidden=[16], enc_dim=16, proj_dim=8, batch_size=32,
                      max_steps=20, eval_every=10, queue=16)
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
    cfg = TrainConfig(variant="any", loss="any", hidden=[8], enc_dim=8, proj_dim=4, batch_size=32, max_steps=3)
    with pytest.raises(FloatingPointError, match="any"):
        train_contrastive(torch.tensor(data["x_train"]), torch.tensor(data["y_train"]).float(),
                          torch.tensor(data["x_val"]), data["y_val"], cfg, torch.Generator().manual_seed(0),
                          loss_fn=lambda z, y, temperature: z.sum() * float("nan"))
