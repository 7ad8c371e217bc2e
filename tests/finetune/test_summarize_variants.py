"""The fine-tuning comparison (``finetune.evaluate.summarize_variants``, stage
``finetune_evaluate``) on tiny real embeddings: the strongest baseline is the one with the
best validation kNN problem x tier purity, every row gets a CI containing its mean, a row
that separates the cells perfectly leads, and a missing row is a clear error."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from contrastlab.errors import InputError
from contrastlab.finetune.evaluate import BASELINES, item_metrics, summarize_variants


def _df() -> pd.DataFrame:
    rows = []
    for p in range(8):
        for t in ("PASS", "FAIL"):
            for j in range(4):
                split = ("test_b" if p >= 6 else "train" if j < 2 else "val" if j == 2 else "test_a")
                rows.append({"id": f"{p}{t}{j}", "problem": f"P{p}", "tier": t, "split": split})
    return pd.DataFrame(rows)


def _write(tmp, name, emb, df, seeds=1):
    items = item_metrics(torch.as_tensor(emb), df["problem"], df["tier"], df["split"], knn_k=(1, 3))
    flat = {f"{s}/{m}": np.stack([v] * seeds) for s, d in items.items() for m, v in d.items()}
    (tmp / "items").mkdir(exist_ok=True)
    np.savez(tmp / "items" / f"{name}.npz", seeds=np.arange(seeds), **flat)


def test_summary_picks_the_baseline_on_validation_and_ranks_the_separating_row_first(tmp_path):
    df = _df()
    rng = np.random.default_rng(0)
    cell = {k: rng.normal(size=16) for k in sorted(set(df["problem"] + df["tier"]))}
    perfect = np.stack([cell[p + t] + 0.01 * rng.normal(size=16) for p, t in zip(df["problem"], df["tier"])])
    noise = rng.normal(size=(len(df), 16))
    half = np.stack([cell[p + "PASS"] for p in df["problem"]]) + 0.5 * noise  # problem, not tier
    _write(tmp_path, "good", perfect, df)
    _write(tmp_path, "bad", noise, df)
    for b, e in zip(BASELINES, (half, noise, noise)):
        _write(tmp_path, b, e, df)
    ft = SimpleNamespace(variants=["good", "bad"], eval=SimpleNamespace(knn_k=[1, 3], n_resamples=200))
    out = summarize_variants(ft, df, tmp_path)
    assert out["baseline"] == BASELINES[0] and out["variants"] == ["good", "bad", *BASELINES]
    t = out["tables"]["a"]["knn3_pxt"]
    assert t["good"]["mean"] > t["bad"]["mean"] and t["good"]["in_mcs"] and not t["bad"]["in_mcs"]
    for row in t.values():
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    assert 0 < out["ceiling"]["knn3_pxt"]["a"] <= 1


def test_a_missing_row_names_the_stage_to_run(tmp_path):
    df = _df()
    _write(tmp_path, "good", np.random.default_rng(1).normal(size=(len(df), 8)), df)
    ft = SimpleNamespace(variants=["good"], eval=SimpleNamespace(knn_k=[1, 3], n_resamples=50))
    with pytest.raises(InputError, match="finetune_encoder@frozen"):
        summarize_variants(ft, df, tmp_path)
