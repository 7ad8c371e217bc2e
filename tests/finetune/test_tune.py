"""Tuning of the fine-tuning rows (contrastlab.finetune.tune) on a tiny real encoder: the
shared protocol (trial 0 = the declared configuration, budget, resumption), the row spaces,
and the final stage applying the choices."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from contrastlab.errors import UnknownNameError
from contrastlab.params.finetune import FinetuneParams


@pytest.fixture
def tiny_setup(tmp_path, tiny_bert, tokenizer, snippets):
    """A saved tiny BERT, a variants table (each snippet twice: train and validation rows of
    the same cell), the params and the lower-layer cache."""
    from contrastlab.finetune.run import build_cache

    folder = tmp_path / "bert"
    tiny_bert(7).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    rows = [(p, t, c, "train") for p, t, c in snippets] + \
           [(p, t, c + "\n# again", "val") for p, t, c in snippets]
    df = pd.DataFrame(rows, columns=["problem", "tier", "text", "split"])
    ft = FinetuneParams(model=str(folder), max_length=64, layers=1, proj_dim=8, proj_hidden=16,
                        steps=2, eval_every=1, warmup=0.0, batch_problems=2, batch_per_problem=2,
                        tune={"trials": 4, "startup_trials": 1, "seeds": [100, 101],
                              "max_resource": 2})
    return ft, df, build_cache(ft, df["text"].tolist()), tmp_path


def test_row_spaces_drop_what_a_row_does_not_use():
    from contrastlab.finetune.tune import TUNED_ROWS, row_space

    ft = FinetuneParams()
    assert set(TUNED_ROWS) == {"mulsupcon", "all", "any", "simdis", "bce", "head"}
    assert set(row_space(ft, "mulsupcon")) == {"temperature", "lr_encoder", "lr_head"}
    assert "temperature" not in row_space(ft, "bce") and "lr_encoder" in row_space(ft, "bce")
    assert set(row_space(ft, "head")) == {"temperature", "lr_head"}
    assert row_space(ft, "frozen") == {} == row_space(ft, "tfidf")
    assert "lr_encoder" not in row_space(FinetuneParams(layers=0), "all")
    with pytest.raises(UnknownNameError):
        row_space(ft, "nope")


def test_bad_choices_and_overlapping_seeds_are_rejected():
    from pydantic import ValidationError

    from contrastlab.finetune.tune import apply_tuned

    ft = FinetuneParams()
    assert apply_tuned(ft, {"temperature": 0.3}).temperature == 0.3
    with pytest.raises(ValueError, match="not tunable"):
        apply_tuned(ft, {"steps": 5})
    with pytest.raises(ValidationError):
        apply_tuned(ft, {"temperature": -1.0})
    with pytest.raises(ValidationError, match="overlap"):
        FinetuneParams(seeds=[0, 100])
    with pytest.raises(ValidationError, match="cannot be tuned"):
        FinetuneParams(tune={"search": {"steps": {"type": "int", "low": 1, "high": 9}}})


def test_study_starts_from_the_default_and_resumes(tiny_setup):
    from contrastlab.finetune.tune import load_tuned, run_tuning

    ft, df, cache, tmp = tiny_setup
    dirs = (tmp / "tuned", tmp / "hist", tmp / "journal")
    res = run_tuning(ft, "mulsupcon", df, cache, *dirs)
    hist = pd.read_csv(tmp / "hist" / "mulsupcon.csv")
    assert len(hist) == ft.tune.trials == res.n_complete + res.n_pruned + res.n_failed
    first = hist.iloc[0]
    assert first["trial"] == 0 and first["state"] == "COMPLETE"
    for k in ("temperature", "lr_encoder", "lr_head"):
        assert first[k] == pytest.approx(getattr(ft, k))
    assert not (hist["temperature"].nunique() == 1 and hist["lr_head"].nunique() == 1)
    complete = hist[hist["state"] == "COMPLETE"]
    assert res.best_value == pytest.approx(complete["value"].max())
    assert res.best_value >= first["value"]  # the choice is never worse than the default
    assert 0 < res.best_value <= 1
    tuned = json.loads((tmp / "tuned" / "mulsupcon.json").read_text())
    assert tuned["objective"] == "val_map" and set(tuned["params"]) == {"temperature", "lr_encoder", "lr_head"}
    applied = load_tuned(ft, tmp / "tuned" / "mulsupcon.json")
    assert applied.temperature == pytest.approx(tuned["params"]["temperature"])
    assert applied.steps == ft.steps and applied.layers == ft.layers
    # a rerun resumes the finished study: no new trial, the same choice
    again = run_tuning(ft, "mulsupcon", df, cache, *dirs)
    assert again.best_params == res.best_params
    assert len(pd.read_csv(tmp / "hist" / "mulsupcon.csv")) == ft.tune.trials


def test_untrained_rows_write_a_note_without_training(tiny_setup):
    from contrastlab.finetune.tune import load_tuned, run_tuning

    ft, df, _, tmp = tiny_setup
    assert run_tuning(ft, "tfidf", df, None, tmp / "t", tmp / "h", tmp / "j") is None
    note = json.loads((tmp / "t" / "tfidf.json").read_text())
    assert note["params"] == {} and "nothing to tune" in note["note"]
    assert load_tuned(ft, tmp / "t" / "tfidf.json") == ft


def test_scores_are_validation_only(tiny_setup):
    """Changing the held-out rows' text (split a test, split b) leaves every trial's score
    unchanged: the objective never reads them."""
    from contrastlab.finetune.run import build_cache
    from contrastlab.finetune.tune import run_tuning

    ft, df, _, tmp = tiny_setup
    ft = ft.model_copy(update={"tune": ft.tune.model_copy(update={"trials": 2})})
    extra = pd.DataFrame({"problem": ["A", "B"], "tier": ["PASS", "FAIL"],
                          "text": ["def f():\n    return 1", "def g():\n    return 2"],
                          "split": ["test_a", "test_b"]})
    values = []
    for k, text in enumerate(["x = 1", "y = [i for i in range(9)]"]):
        d = pd.concat([df, extra.assign(text=extra["text"] + "\n" + text)], ignore_index=True)
        run_tuning(ft, "all", d, build_cache(ft, d["text"].tolist()), tmp / f"t{k}",
                   tmp / f"h{k}", tmp / f"j{k}")
        values.append(pd.read_csv(tmp / f"h{k}" / "all.csv")["value"].to_numpy())
    np.testing.assert_allclose(values[0], values[1])


def test_the_cache_bytes_do_not_depend_on_threads_or_batch_size(tiny_setup):
    """Issue 38: the lower-layer cache is a float64 pass rounded to a fixed grid, so 1 and 2
    threads and another encoding batch size give the same bytes; the values stay within the
    grid of the float32 pass's."""
    import torch

    from contrastlab.finetune.run import _encoder, build_cache

    ft, df, cache, _ = tiny_setup
    texts = df["text"].tolist()
    keep = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        other = build_cache(ft.model_copy(update={"batch_size_encode": 3}), texts)
    finally:
        torch.set_num_threads(keep)
    for k in cache:
        assert cache[k].dtype == other[k].dtype
        assert cache[k].numpy().tobytes() == other[k].numpy().tobytes(), k
    enc = _encoder(ft, proj_dim=0)
    f32 = torch.cat(enc.lower_states(enc.tokenize(texts), ft.batch_size_encode))
    assert f32.shape == cache["states"].shape
    torch.testing.assert_close(cache["states"], f32, rtol=2 ** -15, atol=1e-5)
    assert not torch.equal(cache["states"], f32)  # rounded: not the float32 bytes


def test_the_index_stage_keeps_the_final_runs_first_seed(tiny_setup):
    """Stage finetune_index retrains the index variant's first seed with its tuned choices:
    its index holds the embeddings finetune_encoder stored for that seed, and the compared
    row's run folder holds no encoder (it is committed)."""
    import yaml
    from safetensors.torch import load_file, save_file

    from contrastlab.finetune.final import run_final_variant, run_index_variant
    from contrastlab.finetune.index import load_index

    from contrastlab.finetune.run import build_cache

    ft, df, _, tmp = tiny_setup
    ft = ft.model_copy(update={"seeds": [5, 6]})
    df = pd.concat([df, *(df[df["split"] == "train"].assign(split=s, text=df["text"] + f"\n# {s}")
                          for s in ("test_a", "test_b"))], ignore_index=True)
    cache = build_cache(ft, df["text"].tolist())
    params = tmp / "params.yaml"
    params.write_text(yaml.safe_dump({"finetune": ft.model_dump(mode="json", exclude={"index_variant"})}))
    v = ft.index_variant
    data, cfile, tuned = tmp / "v.parquet", tmp / "cache.safetensors", tmp / "tuned"
    df.assign(id=[f"s{i}" for i in range(len(df))]).to_parquet(data)
    save_file(cache, str(cfile))
    tuned.mkdir()
    (tuned / f"{v}.json").write_text(json.dumps({"params": {"temperature": 0.33, "lr_head": 3e-3}}))
    run_final_variant(params, [], v, data, cfile, tmp / "m", tmp / "runs", tuned / f"{v}.json")
    run_index_variant(params, data, cfile, tuned, tmp / "index")
    run = tmp / "runs" / v
    assert sorted(p.name for p in run.iterdir()) == ["embeddings.safetensors", "run.json"]
    assert json.loads((run / "run.json").read_text()) == {"variant": v, "seeds": [5, 6]}
    kept = load_file(str(run / "embeddings.safetensors"))["embeddings"]
    index, meta, _ = load_index(tmp / "index")
    got = index.reconstruct_n(0, index.ntotal)
    want = (kept[0] / kept[0].norm(dim=1, keepdim=True)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert not np.allclose(got, (kept[1] / kept[1].norm(dim=1, keepdim=True)).numpy(), atol=1e-3)
    assert (meta["variant"], meta["seed"]) == (v, 5) and len(meta["rows"]) == len(df)
