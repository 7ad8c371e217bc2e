"""The fine-tuning comparison (``finetune.evaluate.summarize_variants``, stage
``finetune_summary``) on tiny real embeddings: the strongest baseline is the one with the
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


def _tier_setup(tmp_path):
    """Variants table with texts (the variants of a problem are at most one token apart, and
    the differing token says nothing about the tier), stored embeddings for every row but TF-IDF, and the rows' kNN arrays."""
    from safetensors.torch import save_file

    from contrastlab.finetune.tfidf import tfidf_embeddings

    df = _df()
    ops = np.random.default_rng(1).choice(["+", "-", "*"], size=len(df))  # unrelated to the tier
    df["text"] = [f"def f{p}(x):\n    return x {o} 1" for p, o in zip(df["problem"], ops)]
    rng = np.random.default_rng(0)
    cell = {k: rng.normal(size=16) for k in sorted(set(df["problem"] + df["tier"]))}
    perfect = np.stack([cell[p + t] + 0.01 * rng.normal(size=16) for p, t in zip(df["problem"], df["tier"])])
    prob = {p: rng.normal(size=16) for p in sorted(set(df["problem"]))}
    blind = np.stack([prob[p] for p in df["problem"]]) + 0.3 * rng.normal(size=(len(df), 16))
    embs = {"good": np.stack([perfect, perfect + 0.01 * rng.normal(size=perfect.shape)]),
            "bad": rng.normal(size=(2, len(df), 16)), "frozen": blind[None],
            "head": np.stack([blind, blind])}
    runs = tmp_path / "runs"
    for name, e in embs.items():
        (runs / name).mkdir(parents=True)
        save_file({"embeddings": torch.as_tensor(e, dtype=torch.float32)},
                  str(runs / name / "embeddings.safetensors"))
        _write(tmp_path, name, e[0], df, seeds=len(e))
    (runs / "tfidf").mkdir()
    _write(tmp_path, "tfidf", tfidf_embeddings(df["text"].tolist(), df["split"] == "train", 100), df)
    ft = SimpleNamespace(variants=["good", "bad"],
                         eval=SimpleNamespace(knn_k=[1, 3], n_resamples=200, tfidf_max_features=100))
    return df, ft, runs


def test_tier_tables_rank_the_cell_separating_row_first_against_chance_and_ceiling(tmp_path):
    """The tier arrays (stage finetune_evaluate) and their tables (stage finetune_summary, from
    the arrays as tier_items.npz stores them)."""
    from contrastlab.finetune.evaluate import nest, tier_arrays, tier_summary
    from contrastlab.finetune.tiers import CEILING, CHANCE

    df, ft, runs = _tier_setup(tmp_path)
    items = tier_arrays(ft, df, runs, tmp_path)
    out = tier_summary(ft, df, nest(items))
    assert list(nest(items)) == out["rows"]  # the stored order: variants, baselines, references
    assert out["rows"] == ["good", "bad", *BASELINES, CHANCE, CEILING]
    assert out["baseline"] in (*BASELINES, CHANCE)
    assert out["validation"][CHANCE] == 0.5 and out["validation"]["good"] == pytest.approx(1.0)
    assert out["pairs"]["n"] > 0 and 0 < out["pairs"]["differ_in_tier"] < 1
    for s in ("a", "b"):
        t = out["tables"][s]["wp_auc"]
        assert t["good"]["mean"] == pytest.approx(1.0) and t[CEILING]["mean"] == 1.0
        assert t[CHANCE]["mean"] == t[CHANCE]["ci_low"] == t[CHANCE]["ci_high"] == 0.5
        assert t["good"]["in_mcs"] and "in_mcs" not in t[CEILING]  # the ceiling is no candidate
        assert t["good"]["mean"] > t[out["baseline"]]["mean"]
        for m, tab in out["tables"][s].items():
            for row in tab.values():
                assert row["ci_low"] - 1e-12 <= row["mean"] <= row["ci_high"] + 1e-12, (s, m)
        # the secondary column is the rows' stored kNN arrays; the reference rows' are computed
        with np.load(tmp_path / "items" / "good.npz") as z:
            assert out["tables"][s]["knn3_pxt"]["good"]["mean"] == pytest.approx(z[f"{s}/knn3_pxt"].mean())
        assert out["tables"][s]["knn3_pxt"][CEILING]["mean"] >= out["tables"][s]["knn3_pxt"]["good"]["mean"] - 1e-12
    assert out["p_floor"] <= 0.005 and out["n_resamples"] >= 200
    assert out["tables"]["a"]["wp_auc"]["good"]["n_resamples"] == out["n_resamples"]
    assert items["good/a/wp_auc"].shape[0] == 2 and items["frozen/a/wp_auc"].shape[0] == 1
    # finetune_summary's path: the same tier tables from tier_items.npz, beside the kNN tables
    from contrastlab.finetune.evaluate import summary

    np.savez(tmp_path / "tier_items.npz", **items)
    full = summary(ft, df, tmp_path)
    assert full["tier"] == out and full["variants"] == ["good", "bad", *BASELINES]


def test_tier_tables_check_the_recomputed_tfidf_rows(tmp_path):
    from contrastlab.finetune.evaluate import tier_arrays

    df, ft, runs = _tier_setup(tmp_path)
    _write(tmp_path, "tfidf", np.random.default_rng(3).normal(size=(len(df), 8)), df)
    with pytest.raises(InputError, match="do not reproduce"):
        tier_arrays(ft, df, runs, tmp_path)
