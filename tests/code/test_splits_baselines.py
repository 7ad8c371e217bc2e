"""Leakage control of the split (related distributions, near-duplicate bodies), the
training-only target space and the untrained baselines on hand-made corpora."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from contrastlab.data.splits import (assign_splits, name_family, near_duplicate_groups,
                                     repository_groups, top_level_names)
from contrastlab.evaluation.retrieval import true_ranks
from contrastlab.models.code_baselines import TargetSpace, fit_ridge, pooled_signature
from contrastlab.training.code import CodeData, CodeStudent, predict, prepare_targets

LONG = """result = []
for index, value in enumerate(values):
    if value is None:
        continue
    scaled = value * factor + offset
    result.append((index, scaled))
return result"""


def test_near_duplicates_grouped_on_hand_made_bodies():
    near = LONG.replace("offset", "shift")  # one identifier renamed
    other = "total = 0\nfor x in xs:\n    total += x\nreturn total"
    other2 = "with open(path) as fh:\n    data = fh.read()\nreturn json.loads(data)"
    groups = near_duplicate_groups([LONG, other, near, other2], threshold=0.8)
    assert groups[0] == groups[2] == 0
    assert len({groups[0], groups[1], groups[3]}) == 3
    # at a threshold above their Jaccard similarity they stay apart
    assert near_duplicate_groups([LONG, near], threshold=0.95).tolist() == [0, 1]


def test_related_distributions_are_one_group_and_land_in_one_split():
    assert name_family("mlflow-skinny") == "mlflow" and name_family("opentelemetry-sdk") == "opentelemetry"
    assert name_family("python-dateutil") == "python-dateutil"
    tops = {"mlflow": {"mlflow"}, "mlflow-skinny": {"mlflow"}, "dvc": {"dvc"},
            "dvc-data": {"dvc_data"}, "opentelemetry-api": {"opentelemetry"},
            "opentelemetry-sdk": {"opentelemetry"}, "python-dateutil": {"dateutil"},
            "python-dotenv": {"dotenv"}, "vendorer": {"six"}, "six": {"six"}}
    g = repository_groups(tops)
    assert g["mlflow"] == g["mlflow-skinny"] and g["dvc"] == g["dvc-data"]
    assert g["opentelemetry-api"] == g["opentelemetry-sdk"] and g["vendorer"] == g["six"]
    assert g["python-dateutil"] != g["python-dotenv"]
    assert top_level_names(["mlflow/a/b.py", "six.py"]) == {"mlflow", "six"}
    repos = [r for r in tops for _ in range(5)]
    for seed in range(5):
        split = assign_splits(repos, g, np.arange(len(repos)), (0.5, 0.25, 0.25), seed)
        by = {r: set(split[np.array(repos) == r]) for r in tops}
        assert by["mlflow"] == by["mlflow-skinny"] and len(by["mlflow"]) == 1
        assert by["dvc"] == by["dvc-data"]


def test_near_duplicate_in_another_split_is_excluded():
    repos = ["a", "a", "b", "b", "c", "c"]
    g = {r: r for r in "abc"}
    dup = np.array([0, 1, 2, 0, 4, 5])  # row 3 (repo b) is a near-copy of row 0 (repo a)
    split = assign_splits(repos, g, dup, (0.34, 0.33, 0.33), seed=0)
    if split[0] != split[2]:  # a and b in different splits
        assert split[3] == "excluded"
    assert set(split[[0, 1, 2, 4, 5]]) <= {"train", "val", "test"}


def _data(sig, body, split):
    n = len(split)
    return CodeData(torch.as_tensor(sig, dtype=torch.float16), torch.ones(sig.shape[:2], dtype=torch.bool),
                    torch.as_tensor(body, dtype=torch.float32), np.array(split),
                    np.arange(n), np.array([f"r{i}" for i in range(n)]))


def test_centring_is_fitted_on_training_rows_only():
    g = torch.Generator().manual_seed(0)
    body = torch.randn(12, 4, generator=g)
    body[6:] += 100.0  # val/test far away: a fit on all rows would move the mean
    split = ["train"] * 6 + ["val"] * 3 + ["test"] * 3
    sig = torch.randn(12, 3, 4, generator=g)
    t = prepare_targets(_data(sig, body, split), "mean")
    torch.testing.assert_close(t.body_space.mean, body[:6].mean(0))
    torch.testing.assert_close(t.body, body - body[:6].mean(0))
    torch.testing.assert_close(t.sig_space.mean, sig[:6].half().float().mean(1).mean(0), atol=1e-3, rtol=1e-3)
    w = TargetSpace.fit(body[:6], "whiten", eps=1e-6)(body[:6])
    torch.testing.assert_close(w.T @ w / 5, torch.eye(4), atol=1e-3, rtol=1e-3)
    with pytest.raises(ValueError):
        TargetSpace.fit(body, "zca")


def test_baselines_on_hand_made_corpus_with_known_ranks():
    from contrastlab.evaluation.code_baselines import run_baselines

    e = torch.eye(4)
    # pooled signature of row i (two tokens averaging to the vector); bodies e_i (+ a shared offset)
    sig_vec = torch.stack([e[0], e[1], e[2], e[3], e[0] + 0.9 * e[1], e[2]])
    body = torch.stack([e[0], e[1], e[2], e[3], e[1], e[3]]) + 2.0
    sig = torch.stack([sig_vec, sig_vec], 1)
    split = ["train", "train", "train", "val", "test", "test"]
    data = _data(sig, body, split)
    torch.testing.assert_close(pooled_signature(data.sig_states, data.sig_mask), sig_vec, atol=1e-3, rtol=0)
    targets = prepare_targets(data, "mean")
    metrics, ranks = run_baselines(data, targets, [1e-3], k_max=10)
    # raw: every body has the offset 2 (cosine close to equal): test row 4's query e0+0.9e1
    # prefers body 0 (2+1 on the e0 axis) -> rank 2; row 5's query e2 finds body 2 first -> rank 2
    raw = ranks[ranks["baseline"] == "zeroshot_raw"].sort_values("id")["rank"].tolist()
    ranks_raw = true_ranks(F.normalize(sig_vec, dim=-1)[4:], F.normalize(body, dim=-1), [4, 5])
    assert raw == ranks_raw.tolist() == [2, 2]
    assert metrics["zeroshot_raw"]["rank_at_1"] == 0.0 and metrics["zeroshot_raw"]["mrr"] == 0.5
    cen = ranks[ranks["baseline"] == "zeroshot_centred"].sort_values("id")["rank"].tolist()
    q = targets.sig_space(sig_vec)
    exp = true_ranks(q[4:], targets.corpus, [4, 5]).tolist()
    assert cen == exp
    assert metrics["ridge"]["lambda"] == 1e-3 and set(ranks["baseline"]) == {
        "zeroshot_raw", "zeroshot_centred", "ridge"}


def test_ridge_recovers_a_linear_map():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 5, generator=g)
    w = torch.randn(5, 3, generator=g)
    y = x @ w + 0.5
    ww, mx, my = fit_ridge(x, y, 1e-6)
    torch.testing.assert_close(ww, w, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close((x - mx) @ ww + my, y, atol=1e-4, rtol=1e-4)
    assert fit_ridge(x, y, 1e6)[0].abs().max() < 0.05  # heavy shrinkage
    with pytest.raises(ValueError):
        fit_ridge(x, y, 0.0)


def test_residual_student_starts_at_the_centred_zero_shot_map():
    g = torch.Generator().manual_seed(0)
    sig = torch.randn(10, 3, 6, generator=g)
    body = torch.randn(10, 6, generator=g)
    data = _data(sig, body, ["train"] * 6 + ["val"] * 2 + ["test"] * 2)
    t = prepare_targets(data, "mean")
    st = CodeStudent(6, "infonce", 8, 1, 2, 16, 0.0, residual=True, sig_space=t.sig_space)
    got = predict(st, data, np.arange(10), torch.device("cpu"))
    want = F.normalize(t.sig_space(pooled_signature(data.sig_states, data.sig_mask)), dim=-1)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_residual_training_keeps_the_zero_shot_map_when_training_cannot_improve_it(tmp_path):
    """Epoch 0 of a residual run is the zero-shot map itself: it is validated, logged as the
    first history row and kept as the checkpoint when no epoch beats it on val Rank@10."""
    from contrastlab.params.code import ModelParams, TrainParams
    from contrastlab.training.code import load_student, train_code

    g = torch.Generator().manual_seed(1)
    n, t, h = 48, 3, 8
    body = torch.randn(n, h, generator=g)
    sig = body[:, None, :].repeat(1, t, 1)  # pooled signature == body: zero-shot ranks are all 1
    split = ["train"] * 24 + ["val"] * 12 + ["test"] * 12
    data = _data(sig, body, split)
    targets = prepare_targets(data, "mean")
    tp = TrainParams(epochs=3, batch_size=8, patience=2, lr=0.05, warmup_epochs=0.0,
                     device="cpu", threads=1, seeds=[0], early_stopping="rank_at_10")
    mp = ModelParams(d_model=8, n_layers=1, n_heads=2, ffn=16, dropout=0.0)
    ck = tmp_path / "s.pt"
    out = train_code(data, h, "infonce", mp, tp, ck, targets=targets, seed=0, residual=True,
                     progress=False, log=lambda *_: None)
    first = out["history"][0]
    assert first["epoch"] == 0 and first["val_rank_at_1"] == 1.0 and first["val_rank_at_10"] == 1.0
    assert out["best_epoch"] == 0 and out["epochs_run"] == len(out["history"]) - 1 >= 1
    st = load_student(ck)
    got = predict(st, data, np.arange(n), torch.device("cpu"))
    want = F.normalize(targets.sig_space(pooled_signature(data.sig_states, data.sig_mask)), dim=-1)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # a non-residual run has no epoch-0 row
    out2 = train_code(data, h, "infonce", mp, tp, None, targets=targets, seed=0,
                      progress=False, log=lambda *_: None)
    assert out2["history"][0]["epoch"] == 1 and out2["best_epoch"] >= 1


@pytest.mark.parametrize("rule", ["mrr_plateau", "rank_at_10"])
def test_the_checkpoint_is_the_epoch_the_early_stopping_rule_picks(tmp_path, rule):
    """Both rules see the same trajectory (no stop within the epochs here): ``mrr_plateau``
    keeps the centre of the validation-MRR plateau (:func:`pick_on_grid`), ``rank_at_10`` the
    first epoch with the highest validation Rank@10; the saved weights are that epoch's (they
    reproduce its validation row) and :func:`early_stopping_pick` reads the same epoch back
    from the history."""
    import pandas as pd

    from contrastlab.models.grid_picks import pick_on_grid
    from contrastlab.params.code import ModelParams, TrainParams
    from contrastlab.training.code import load_student, train_code, validate
    from contrastlab.training.code_final import early_stopping_pick

    g = torch.Generator().manual_seed(3)
    n, h = 64, 8
    body = torch.randn(n, h, generator=g)
    sig = body[:, None, :].repeat(1, 2, 1) + 1.5 * torch.randn(n, 2, h, generator=g)
    data = _data(sig, body, ["train"] * 40 + ["val"] * 24)
    targets = prepare_targets(data, "mean")
    mp = ModelParams(d_model=8, n_layers=1, n_heads=2, ffn=16, dropout=0.0)
    tp = TrainParams(epochs=6, batch_size=8, patience=6, lr=0.02, warmup_epochs=0.0,
                     device="cpu", threads=1, seeds=[0], early_stopping=rule)
    ck = tmp_path / "s.safetensors"
    out = train_code(data, h, "infonce", mp, tp, ck, targets=targets, seed=0, residual=True,
                     progress=False, log=lambda *_: None)
    hist = out["history"]
    epochs = [r["epoch"] for r in hist]
    want = (pick_on_grid(epochs, [r["val_mrr"] for r in hist], 24)["choice"] if rule == "mrr_plateau"
            else epochs[int(np.argmax([r["val_rank_at_10"] for r in hist]))])
    assert out["best_epoch"] == want and out["epochs_run"] == 6
    row = next(r for r in hist if r["epoch"] == want)
    assert out["best_val_rank_at_10"] == row["val_rank_at_10"]
    got = validate(load_student(ck), data, targets, data.rows("val"), torch.device("cpu"))
    assert got["val_mrr"] == pytest.approx(row["val_mrr"], abs=1e-6)
    rec = early_stopping_pick(pd.DataFrame([{"seed": 0, **r} for r in hist]), 24, rule)
    assert rec["chosen_seed"] == [want] and rec["rule"] == rule and len(rec["margin_seed"]) == 1
    with pytest.raises(ValueError, match="early_stopping"):
        train_code(data, h, "infonce", mp, tp, None, targets=targets, early_stopping="val_loss",
                   progress=False, log=lambda *_: None)


def test_max_train_trains_on_a_subset_of_the_training_functions():
    from contrastlab.params.code import ModelParams, TrainParams
    from contrastlab.training.code import train_code

    g = torch.Generator().manual_seed(2)
    body = torch.randn(40, 8, generator=g)
    sig = body[:, None, :].repeat(1, 2, 1) + 0.5 * torch.randn(40, 2, 8, generator=g)
    data = _data(sig, body, ["train"] * 32 + ["val"] * 8)
    targets = prepare_targets(data, "mean")
    mp = ModelParams(d_model=8, n_layers=1, n_heads=2, ffn=16, dropout=0.0)
    kw = dict(epochs=2, batch_size=4, patience=5, device="cpu", threads=1, seeds=[0])
    full = train_code(data, 8, "infonce", mp, TrainParams(**kw), None, targets=targets,
                      progress=False, log=lambda *_: None)
    sub = train_code(data, 8, "infonce", mp, TrainParams(**kw, max_train=12), None,
                     targets=targets, progress=False, log=lambda *_: None)
    assert full["steps"] == 2 * (32 // 4) and sub["steps"] == 2 * (12 // 4)
