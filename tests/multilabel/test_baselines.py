"""The scikit-learn baselines (kNN, forests, logistic regression's grid) and the tuning
protocol's folds, seeds and validation-only selection, on tiny hand-made or real inputs."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from contrastlab.errors import InputError
from contrastlab.training.multilabel import (cv_folds, cv_objective, forest_scores, knn_scores,
                                             make_config, train_logreg, tuning_rows)
from contrastlab.utils import repo_root

ROOT = repo_root(Path(__file__).parent)


def test_knn_returns_the_neighbours_labels():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    q = np.array([[2.0, 0.1], [0.1, 3.0], [5.0, 5.2]])
    np.testing.assert_array_equal(knn_scores(x, y, q, 1), y)  # cosine: direction, not length
    # k = 2, uniform: the mean of the two nearest rows' labels; query 0's neighbours: rows 0 and 2
    np.testing.assert_allclose(knn_scores(x, y, q[:1], 2), [[0.5, 0.0, 0.5]])
    # inverse-distance weights: cosine distances of q0 to rows 0 and 2
    d0 = 1 - 2.0 / np.hypot(2.0, 0.1)
    d2 = 1 - 2.1 / (np.hypot(2.0, 0.1) * np.sqrt(2))
    w0, w2 = 1 / d0, 1 / d2
    np.testing.assert_allclose(knn_scores(x, y, q[:1], 2, "distance"), [[w0 / (w0 + w2), 0, w2 / (w0 + w2)]])
    # a query equal to a training row takes that row's labels only
    np.testing.assert_allclose(knn_scores(x, y, x[1:2], 3, "distance"), y[1:2])
    # euclidean sees the length: [5, 5.2] is nearest to [1, 1] in both metrics, [2, 0.1] too
    np.testing.assert_array_equal(knn_scores(x, y, np.array([[0.2, 0.1]]), 1, metric="euclidean"), [[1, 0, 0]])
    with pytest.raises(InputError, match="weights"):
        knn_scores(x, y, q, 1, weights="gaussian")
    with pytest.raises(InputError, match="k=0"):
        knn_scores(x, y, q, 0)


def test_forest_scores_learn_and_handle_a_constant_label():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    y = np.stack([(x[:, 0] > 0), (x[:, 1] > 0), np.zeros(200, bool)], 1).astype(int)
    q = rng.normal(size=(100, 4))
    for kind in ("extratrees", "randomforest"):
        (s,) = forest_scores(kind, x, y, [q], {"n_estimators": 30, "max_features": 1.0}, seed=0, chunk=7)
        assert s.shape == (100, 3) and s.min() >= 0 and s.max() <= 1
        assert ((s[:, 0] > 0.5) == (q[:, 0] > 0)).mean() > 0.9  # it learned label 0
        assert (s[:, 2] == 0).all()  # the constant label scores its constant
        (again,) = forest_scores(kind, x, y, [q], {"n_estimators": 30, "max_features": 1.0}, seed=0, chunk=7)
        np.testing.assert_array_equal(s, again)
    with pytest.raises(InputError, match="unknown kind"):
        forest_scores("gbm", x, y, [q], {}, 0)


class _StubLR:
    """A LogisticRegression stand-in whose validation ranking gets worse with the distance of
    log10(C) from log10(TARGET): d = round(|log10(C / TARGET)|) negatives are ranked above
    every positive (so validation mAP falls strictly with d, for d <= 3)."""

    TARGET = 10.0

    def __init__(self, C, **kw):
        self.c = C

    def fit(self, x, y):
        return self

    def predict_proba(self, a):
        d = min(3, int(round(abs(np.log10(self.c / self.TARGET)))))
        s = a[:, 0].copy()
        neg = np.flatnonzero(s < 0.5)
        s[neg[:d]] += 2.0
        p = 1 / (1 + np.exp(-s))
        return np.stack([1 - p, p], 1)


def test_logreg_grid_extends_past_an_edge_then_stops(monkeypatch):
    import sklearn.linear_model

    monkeypatch.setattr(sklearn.linear_model, "LogisticRegression", _StubLR)
    y = np.array([[1], [0], [1], [0], [1], [0]])
    x = y.astype(float) + 0.01 * np.arange(6)[:, None]
    # the best C (10) lies past the upper edge of [0.01, 0.1, 1]: two extensions reach it
    _, curve, c = train_logreg(x, y, x, y, [0.01, 0.1, 1.0], seed=0, extend=3)
    assert c == pytest.approx(10.0) and curve["C"] == pytest.approx([0.01, 0.1, 1.0, 10.0, 100.0])
    assert curve["val_map"][3] == 1.0 and max(curve["val_map"][:3]) < 1.0
    # inside the grid: no extension
    _, curve, c = train_logreg(x, y, x, y, [1.0, 10.0, 100.0], seed=0, extend=3)
    assert c == pytest.approx(10.0) and len(curve["C"]) == 3
    # one extension is not enough to bracket it: a clear error
    with pytest.raises(InputError, match="edge of the grid"):
        train_logreg(x, y, x, y, [0.01, 0.1, 1.0], seed=0, extend=1)
    with pytest.raises(InputError, match="increasing"):
        train_logreg(x, y, x, y, [1.0, 0.1, 10.0], seed=0)


def test_default_grid_is_wide_and_log_spaced():
    from contrastlab.params import load_params

    grid = load_params(ROOT / "params.yaml").multilabel.train.logreg_c
    assert grid[0] <= 1e-4 and grid[-1] >= 1e3
    np.testing.assert_allclose(np.diff(np.log10(grid)), np.log10(grid[1] / grid[0]))


class _NoTest(dict):
    """A data set whose test split must not be read."""

    def __getitem__(self, k):
        if "test" in k:
            raise AssertionError(f"tuning read {k}")
        return super().__getitem__(k)


def _yeast(n=240):
    from contrastlab.data.multilabel import load_mulan

    d = load_mulan("yeast", ROOT / "data" / "vendor" / "mulan", "/nonexistent")
    x = d.x_train[:n].astype(np.float32)
    return (x - x.mean(0)) / x.std(0).clip(1e-6), d.y_train[:n].astype(np.int64)


def test_cv_folds_partition_and_stratify():
    _, y = _yeast()
    folds = cv_folds(y, 3, seed=0)
    assert len(folds) == 3
    val = np.concatenate([va for _, va in folds])
    assert sorted(val) == list(range(len(y)))  # every row validates exactly once
    for tr, va in folds:
        assert not set(tr) & set(va) and len(tr) + len(va) == len(y)
        # each label's share of positives in a fold stays near its overall share
        assert np.abs(y[va].mean(0) - y.mean(0)).max() < 0.06
    assert [va.tolist() for _, va in cv_folds(y, 3, seed=0)] == [va.tolist() for _, va in folds]
    with pytest.raises(InputError):
        cv_folds(y, 1, 0)


def test_tuning_objective_reads_no_test_row_and_tree_choice_lies_in_space():
    from contrastlab.params import load_params

    ml = load_params(ROOT / "params.yaml").multilabel
    x, y = _yeast()
    arrays = _NoTest(x_train=x[:180], y_train=y[:180], x_val=x[180:], y_val=y[180:],
                     x_test=np.full_like(x, np.nan), y_test=y)
    xs, ys = tuning_rows(arrays)
    assert xs.shape == (240, x.shape[1])
    folds = cv_folds(ys, 3, 0)
    space = ml.variants["extratrees"].search
    seen = []
    best = None
    for depth in space["max_depth"]["choices"][:3]:
        choice = {"max_depth": depth, "max_features": "sqrt", "min_samples_leaf": 2}
        cfg = make_config(ml, "yeast", "extratrees", choices=choice)
        cfg.model["n_estimators"] = 20
        m, se = cv_objective(xs, ys, folds, cfg, ml.tune.run_seeds, report=lambda f, v: seen.append(f))
        assert 0 < m < 1 and se >= 0
        if best is None or m > best[0]:
            best = (m, choice)
    assert seen == [1, 2] * 3  # step = folds done (the pruner's resource); the last fold unreported
    assert best[1]["max_depth"] in space["max_depth"]["choices"]
    with pytest.raises(InputError, match="not a hyperparameter of extratrees"):
        make_config(ml, "yeast", "extratrees", choices={"temperature": 0.1})


def test_tuning_seeds_must_differ_from_final_seeds():
    from contrastlab.params import ParamsError, load_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert not set(raw["multilabel"]["seeds"]) & set(raw["multilabel"]["tune"]["run_seeds"])
    raw["multilabel"]["tune"]["run_seeds"] = [4, 100, 101]
    f = Path(__import__("tempfile").mkdtemp()) / "params.yaml"
    f.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError, match="disjoint from the final seeds"):
        load_params(f)


def test_train_stage_uses_per_dataset_choices(tmp_path):
    """tuned_choices: a tuned data set's own choices, else the params.yaml values (said so)."""
    from contrastlab.training import multilabel_final as mod

    f = tmp_path / "knn.json"
    f.write_text(json.dumps({"params": {}, "datasets": {"yeast": {"params": {"k": 7}}}}))
    assert mod.tuned_choices(f, "yeast") == ({"k": 7}, "tuned on yeast (CV on its training part)")
    c, src = mod.tuned_choices(f, "enron")
    assert c == {} and "params.yaml" in src


def test_hybrids_take_their_parts_choices_and_see_raw_and_learned_features(monkeypatch):
    from contrastlab.params import load_params
    from contrastlab.training import multilabel as tm

    ml = load_params(ROOT / "params.yaml").multilabel
    cfg = make_config(ml, "yeast", "hybrid_et", choices={"temperature": 0.3},
                      model_choices={"max_depth": 8, "min_samples_leaf": 3})
    assert (cfg.loss, cfg.hybrid, cfg.temperature) == (ml.hybrid_base, "et", 0.3)
    assert cfg.model["max_depth"] == 8 and cfg.model["n_estimators"] == ml.variants["extratrees"].model["n_estimators"]
    assert make_config(ml, "yeast", "hybrid_concat").hybrid == "concat"
    x, y = _yeast(160)
    data = {"x_train": x[:100], "y_train": y[:100], "x_val": x[100:130], "y_val": y[100:130],
            "x_test": x[130:], "y_test": y[130:]}
    for v in ("hybrid_concat", "hybrid_et"):
        cfg = make_config(ml, "yeast", v)
        cfg.hidden, cfg.enc_dim, cfg.proj_dim, cfg.max_steps, cfg.eval_every = [16], 8, 8, 6, 3
        cfg.model["n_estimators"] = 10
        widths = []
        real = tm.forest_scores if v == "hybrid_et" else tm.fit_linear

        def spy(*a, _real=real, **k):
            widths.append((a[1] if v == "hybrid_et" else a[0]).shape[1])
            return _real(*a, **k)

        monkeypatch.setattr(tm, "forest_scores" if v == "hybrid_et" else "fit_linear", spy)
        r = tm.run_seed(data, cfg, 0)
        assert widths == [x.shape[1] + 8]  # raw features beside the 8 encoder outputs
        assert 0 < r.metrics["map"] <= 1 and r.scores.shape == (30, y.shape[1])


def test_knn_scores_tie_exactly_where_exact_arithmetic_ties():
    """With distance weights, a label carried by every neighbour scores sum(w) / sum(w): exactly
    1.0 after the rounding, not 1.0 or 1 - 1 ulp by the order of the sums (which broke ties
    between such rows differently from run to run and moved mAP)."""
    rng = np.random.default_rng(3)
    x, q = rng.normal(size=(300, 5)), rng.normal(size=(200, 5))
    y = np.stack([np.ones(300), rng.random(300) < 0.5], 1).astype(int)
    s = knn_scores(x, y, q, 60, "distance")
    np.testing.assert_array_equal(s[:, 0], 1.0)
    # the unrounded weighted mean is not exactly 1 for some rows here: the check can fail
    from sklearn.neighbors import NearestNeighbors
    d, idx = NearestNeighbors(n_neighbors=60, metric="cosine", algorithm="brute").fit(x).kneighbors(q)
    raw_w = 1.0 / np.maximum(d, 1e-12)
    raw = np.einsum("mk,mkc->mc", raw_w, y[idx].astype(float)) / raw_w.sum(1, keepdims=True)
    assert (raw[:, 0] != 1.0).any()


def test_finetune_hybrid_trains_the_pretrained_encoder_end_to_end_with_the_bce_choices(monkeypatch):
    """hybrid_ft: the encoder that the contrastive phase returns is what BCE fine-tuning starts
    from (copied, then trained: the pre-trained one is left as it was), at the BCE MLP's
    learning rate and masking rate; the contrastive phase keeps hybrid_base's choices."""
    import torch

    from contrastlab.params import load_params
    from contrastlab.training import multilabel as tm

    ml = load_params(ROOT / "params.yaml").multilabel
    cfg = make_config(ml, "yeast", "hybrid_ft", choices={"temperature": 0.3, "lr": 0.0011},
                      model_choices={"lr": 0.0023, "mask_rate": 0.15})
    assert (cfg.loss, cfg.hybrid, cfg.temperature, cfg.lr) == (ml.hybrid_base, "finetune", 0.3, 0.0011)
    # the fine-tuning phase's lr / mask_rate: plain fields, not entries of the model dict
    assert (cfg.finetune_lr, cfg.finetune_mask_rate, cfg.model) == (0.0023, 0.15, {})
    declared = make_config(ml, "yeast", "hybrid_ft")  # untuned: the bce row's values
    assert (declared.finetune_lr, declared.finetune_mask_rate) == (
        ml.variants["bce"].lr, ml.variants["bce"].mask_rate)
    assert make_config(ml, "yeast", "bce").finetune_lr is None

    x, y = _yeast(160)
    data = {"x_train": x[:100], "y_train": y[:100], "x_val": x[100:130], "y_val": y[100:130],
            "x_test": x[130:], "y_test": y[130:]}
    cfg.hidden, cfg.enc_dim, cfg.proj_dim, cfg.max_steps, cfg.eval_every = [16], 8, 8, 6, 3
    pre, seen = {}, {}
    real_c, real_b = tm.train_contrastive, tm.train_bce

    def spy_c(*a, **k):
        enc, curve = real_c(*a, **k)
        pre["enc"], pre["state"] = enc, {n: p.clone() for n, p in enc.state_dict().items()}
        return enc, curve

    def spy_b(*a, encoder=None, **k):
        seen.update(encoder=encoder, lr=a[4].lr, mask_rate=a[4].mask_rate)
        pred, curve = real_b(*a, encoder=encoder, **k)
        seen["tuned"] = {n: p.clone() for n, p in pred.model[0].state_dict().items()}
        return pred, curve

    monkeypatch.setattr(tm, "train_contrastive", spy_c)
    monkeypatch.setattr(tm, "train_bce", spy_b)
    r = tm.run_seed(data, cfg, 0)
    assert seen["encoder"] is pre["enc"] and (seen["lr"], seen["mask_rate"]) == (0.0023, 0.15)
    after = pre["enc"].state_dict()
    assert all(torch.equal(after[n], p) for n, p in pre["state"].items())  # left unchanged
    assert any(not torch.equal(seen["tuned"][n], p) for n, p in pre["state"].items())  # trained
    assert not any(p.requires_grad for p in pre["enc"].parameters())
    assert 0 < r.metrics["map"] <= 1 and r.scores.shape == (30, y.shape[1])
    assert "pretrain_best_step" in r.chosen and "best_step" in r.chosen


def test_bce_fine_tuning_at_zero_learning_rate_keeps_the_given_encoder():
    """train_bce(encoder=...) starts from that encoder: with lr 0 and no weight decay the
    model's encoder equals it, and its predictions are a linear layer on its features."""
    import torch

    from contrastlab.models.mlp import build_encoder
    from contrastlab.params import load_params
    from contrastlab.training.multilabel import train_bce

    ml = load_params(ROOT / "params.yaml").multilabel
    cfg = make_config(ml, "yeast", "bce")
    cfg.hidden, cfg.enc_dim, cfg.max_steps, cfg.eval_every = [16], 8, 6, 3
    cfg.lr, cfg.weight_decay = 0.0, 0.0
    x, y = _yeast(160)
    xt, yt = torch.as_tensor(x[:100], dtype=torch.float32), torch.as_tensor(y[:100], dtype=torch.float32)
    torch.manual_seed(5)
    enc = build_encoder("mlp", x.shape[1], [16], 8, cfg.dropout).eval()
    pred, _ = train_bce(xt, yt, torch.as_tensor(x[100:130], dtype=torch.float32), y[100:130], cfg,
                        torch.Generator().manual_seed(0), encoder=enc)
    got = pred.model[0]
    assert got is not enc
    assert all(torch.equal(a, b) for a, b in zip(got.state_dict().values(), enc.state_dict().values()))
    lin = pred.model[1]
    xq = torch.as_tensor(x[130:], dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(pred(xq), torch.sigmoid(lin(enc(xq))))


def test_a_finetune_hybrid_must_borrow_from_the_bce_mlp(monkeypatch):
    """The fine-tuning phase's lr / mask_rate come from model_of: a finetune hybrid pointing at
    a forest (or at nothing) is refused with the row named, not run with meaningless values."""
    import dataclasses

    from contrastlab.params import load_params
    from contrastlab.training import multilabel as tm

    ml = load_params(ROOT / "params.yaml").multilabel
    table = dict(tm._TABLE)
    for wrong in ("extratrees", None):
        table["hybrid_ft"] = dataclasses.replace(tm._TABLE["hybrid_ft"], model_of=wrong)
        monkeypatch.setattr(tm, "_TABLE", table)
        with pytest.raises(InputError, match="hybrid_ft.*mlp_bce"):
            make_config(ml, "yeast", "hybrid_ft")
