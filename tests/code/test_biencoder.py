"""Bi-encoder fine-tuning (contrastlab.biencoder): the cache, the loss the loop minimises
against a plain per-item InfoNCE, hard-negative mining against brute force, the batches, the
signature index and the query CLI. Tiny random 2-layer BERT, seconds on a CPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from contrastlab.biencoder.data import Pairs, build_cache, make_encoder
from contrastlab.biencoder.train import (BiEncoder, load_cache, mine_hard_negatives, pair_batches,
                                         train_biencoder)
from contrastlab.errors import InputError
from contrastlab.params.biencoder import BiencoderParams, BiencoderRow

SIGS = ["def add(a, b):", "def read_file(path):", "def parse_json(text):", "def mean(xs):",
        "def to_upper(s):", "def fetch_url(url, timeout):", "def sort_items(items):", "def is_even(n):"]
BODIES = ["return a + b", "with open(path) as f:\n    return f.read()", "return json.loads(text)",
          "return sum(xs) / len(xs)", "return s.upper()", "return requests.get(url, timeout=timeout)",
          "return sorted(items)", "return n % 2 == 0"]


def save_tiny_model(d) -> None:
    """A seeded random 2-layer BERT (hidden 32, dropout off) with the MiniLM tokenizer in ``d``."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from contrastlab.models.teacher import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    BertModel(cfg, add_pooling_layer=False).save_pretrained(d)
    tok.save_pretrained(d)


@pytest.fixture
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    save_tiny_model(d)
    return d


def _be(model_dir, **kw):
    base = dict(model=str(model_dir), layers=1, max_length=32, steps=3, batch_size=4, warmup=0.0,
                hardneg_k=2, hardneg_refresh=2, batch_size_encode=4, sub_batch=3, threads=1)
    return BiencoderParams(**{**base, **kw})


def _pairs(n=len(SIGS)):
    split = np.array(["train"] * 6 + ["val", "test"], dtype=object)[:n]
    return Pairs(np.arange(n), SIGS[:n], BODIES[:n], split, np.array(["r"] * n), np.arange(n), [])


@pytest.mark.slow
def test_cached_states_give_the_embeddings_of_the_raw_texts(model_dir):
    from contrastlab.finetune.train import embed_inputs

    be = _be(model_dir)
    sig, body = load_cache(build_cache(be, SIGS, BODIES))
    assert sig.level == 1 and body.level == 1
    enc = make_encoder(be)
    # float16 cache: equal to the full forward pass within half precision
    assert torch.allclose(embed_inputs(enc, body), enc.encode(BODIES), atol=5e-3)
    assert torch.allclose(embed_inputs(enc, sig), enc.encode(SIGS), atol=5e-3)


def _reference_infonce(zs: torch.Tensor, zb: torch.Tensor, tau: float) -> float:
    """-1/B sum_i log( exp(s_i.b_i / tau) / sum_j exp(s_i.b_j / tau) ), one item at a time."""
    total = 0.0
    for i in range(len(zs)):
        logits = [float(zs[i] @ zb[j]) / tau for j in range(len(zb))]
        m = max(logits)
        total += -(logits[i] - m - math.log(sum(math.exp(x - m) for x in logits)))
    return total / len(zs)


@pytest.mark.parametrize("towers", ["shared", "separate"])
def test_first_step_loss_is_plain_infonce_of_the_batch(model_dir, towers):
    be = _be(model_dir, steps=1, towers=towers)
    pairs = _pairs()
    sig, body = load_cache(build_cache(be, SIGS, BODIES))
    torch.manual_seed(3)
    model = BiEncoder(make_encoder(be), towers, 0.07)
    from contrastlab.finetune.train import embed_inputs

    tr = pairs.rows("train")
    rows = pair_batches(tr, be.batch_size, 1, seed=5)[0]
    zs, zb = embed_inputs(model.sig, sig, rows), embed_inputs(model.body, body, rows)
    ref = _reference_infonce(zs, zb, 0.07)
    res = train_biencoder(model, sig, body, tr, pairs.dup, be=be, row=BiencoderRow(loss="infonce", lr=1e-3, temperature=0.07),
                          seed=5, log_every=1)
    assert res.curve["loss"][0] == pytest.approx(ref, rel=1e-4)
    assert res.tokens == sum(len(sig.ids[i]) + len(body.ids[i]) for i in rows)
    if towers == "separate":
        assert model.sig is not model.body
        assert not torch.equal(model.sig.blocks[1].output.dense.weight, model.body.blocks[1].output.dense.weight)
    else:
        assert model.sig is model.body


def test_training_lowers_the_loss_and_moves_the_temperature(model_dir):
    be = _be(model_dir, steps=12, batch_size=6)
    pairs = _pairs()
    sig, body = load_cache(build_cache(be, SIGS, BODIES))
    model = BiEncoder(make_encoder(be), "shared", 0.07)
    frozen = model.sig.blocks[0].output.dense.weight.clone()
    res = train_biencoder(model, sig, body, pairs.rows("train"), pairs.dup, be=be,
                          row=BiencoderRow(loss="infonce", lr=3e-3, temperature=0.07), seed=0, log_every=1)
    assert np.mean(res.curve["loss"][-3:]) < res.curve["loss"][0]
    assert res.curve["temperature"][-1] != pytest.approx(0.07)
    assert torch.equal(model.sig.blocks[0].output.dense.weight, frozen)  # the cached block is frozen


def test_hardneg_training_runs_and_mines_outside_the_group(model_dir):
    be = _be(model_dir, steps=3, batch_size=3)
    pairs = _pairs()
    sig, body = load_cache(build_cache(be, SIGS, BODIES))
    model = BiEncoder(make_encoder(be), "shared", 0.07)
    res = train_biencoder(model, sig, body, pairs.rows("train"), pairs.dup, be=be,
                          row=BiencoderRow(loss="infonce_hardneg", lr=1e-3), seed=0, log_every=1)
    assert len(res.curve["loss"]) == 3 and all(np.isfinite(res.curve["loss"]))
    # each step embeds B pairs and B * K mined bodies
    assert res.tokens > sum(len(sig.ids[i]) + len(body.ids[i]) for i in pairs.rows("train")[:3])


def _brute_mine(q, c, positive, dup, k):
    out = []
    for i in range(len(q)):
        sims = [(float(q[i] @ c[j]), j) for j in range(len(c))]
        sims.sort(key=lambda t: (-t[0], t[1]))
        out.append([j for _, j in sims if j != positive[i] and dup[j] != dup[positive[i]]][:k])
    return np.array(out)


def test_mining_matches_brute_force_and_skips_near_duplicates():
    g = torch.Generator().manual_seed(0)
    c = torch.nn.functional.normalize(torch.randn(30, 8, generator=g), dim=1)
    q = torch.nn.functional.normalize(c[:10] + 0.3 * torch.randn(10, 8, generator=g), dim=1)
    dup = np.arange(30)
    dup[[1, 2, 3]] = 1         # a near-duplicate group
    dup[[10, 11]] = 10
    positive = np.arange(10)
    got = mine_hard_negatives(q, c, positive, dup, 3)
    np.testing.assert_array_equal(got, _brute_mine(q, c, positive, dup, 3))
    for i in (1, 2, 3):
        assert not set(got[i]) & {1, 2, 3}
    with pytest.raises(InputError):
        mine_hard_negatives(q, c[:4], positive[:4] % 4, np.zeros(4, dtype=int), 3)


def test_pair_batches_are_permutations_seeded_and_checked():
    tr = np.arange(10, 30)
    b = pair_batches(tr, 5, 9, seed=1)
    assert b.shape == (9, 5)
    for e in range(2):  # the first two epochs (4 batches each) cover every row once
        np.testing.assert_array_equal(np.sort(b[4 * e:4 * e + 4].ravel()), tr)
    np.testing.assert_array_equal(b, pair_batches(tr, 5, 9, seed=1))
    assert not np.array_equal(b, pair_batches(tr, 5, 9, seed=2))
    with pytest.raises(InputError):
        pair_batches(np.arange(3), 4, 1, seed=0)


def test_signature_index_and_query_cli(model_dir, tmp_path, capsys):
    from contrastlab.biencoder.index import is_code_index, search_signatures, write_code_index
    from contrastlab.query import main

    be = _be(model_dir)
    enc = make_encoder(be)
    emb = enc.encode(SIGS)  # index the signatures themselves: each finds its own row first
    meta = [{"id": i, "signature": s, "repo": "r", "path": "p.py", "qualname": s[4:s.index("(")]}
            for i, s in enumerate(SIGS)]
    write_code_index(tmp_path / "idx", emb, meta, enc, {"row": "x"})
    assert is_code_index(tmp_path / "idx")
    hits = search_signatures(tmp_path / "idx", SIGS[:3], k=2)
    assert [h[0]["id"] for h in hits] == [0, 1, 2]
    assert main(["--index", str(tmp_path / "idx"), "--signature", SIGS[4], "-k", "1", "--dense"]) == 0
    assert "to_upper" in capsys.readouterr().out
    with pytest.raises(InputError):
        write_code_index(tmp_path / "bad", emb[:2], meta, enc)


@pytest.mark.slow
def test_biencoder_stages_end_to_end(model_dir, tmp_path):
    """biencoder_cache -> tune_biencoder -> train_biencoder (both trainers) -> hybrid_biencoder on
    16 functions, then the signature index through the query CLI."""
    import json
    from pathlib import Path

    import pandas as pd
    from _stagerun import run_stage_here

    root = Path(__file__).resolve().parents[2]
    names = ["add", "read", "parse", "mean", "upper", "fetch", "sort", "even"]
    sigs = [f"def {n}_{r}(x, y):" for r in range(2) for n in names]
    bodies = [f"return {n}_helper(x) + {r} * y" for r in range(2) for n in names]
    n = len(sigs)
    d = tmp_path / "d"
    d.mkdir()
    pd.DataFrame({"id": range(n), "repo": ["a"] * 8 + ["b"] * 4 + ["c"] * 4, "path": "m.py",
                  "qualname": [s[4:s.index("(")] for s in sigs], "signature": sigs, "body": bodies}
                 ).to_parquet(d / "f.parquet")
    pd.DataFrame({"id": range(n), "repo_group": ["a"] * 8 + ["b"] * 4 + ["c"] * 4,
                  "dup_group": range(n), "split": ["train"] * 8 + ["val"] * 4 + ["test"] * 4}
                 ).to_parquet(d / "s.parquet")
    (d / "baselines.json").write_text(json.dumps({"baselines": {"bm25": {"k1": 1.2, "b": 0.75}}}))
    params = tmp_path / "params.yaml"
    params.write_text(
        "code:\n  baselines: {fusion_weights: [0.0, 0.5, 1.0]}\n  biencoder:\n"
        f"    model: {model_dir}\n    max_length: 16\n    steps: 2\n    batch_size: 4\n"
        "    seeds: [0, 1]\n    device: cpu\n    threads: 1\n    index_row: be_a\n"
        "    tune: {trials: 1, startup_trials: 1, seeds: [100]}\n    rows:\n"
        "      be_a: {loss: infonce, search: {lr: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}}}\n"
        "      be_st: {trainer: sentence_transformers, loss: infonce, learn_temperature: false}\n")
    io = ["--params", str(params), "--functions", str(d / "f.parquet"), "--splits", str(d / "s.parquet")]
    cache = ["--cache", str(d / "cache.safetensors")]
    out = ["--models", str(d / "models"), "--metrics", str(tmp_path / "m"), "--data", str(tmp_path / "r"),
           "--plots", str(tmp_path / "p")]
    steps = [["stages/biencoder_cache.py", *io, "--out", str(d / "cache.safetensors")],
             ["stages/tune_biencoder.py", *io, *cache, "--row", "be_a", "--tuned", str(tmp_path / "t"),
              "--history", str(tmp_path / "h"), "--journal", str(tmp_path / "j")],
             ["stages/train_biencoder.py", *io, *cache, "--row", "be_a", "--tuned", str(tmp_path / "t"), *out],
             ["stages/train_biencoder.py", *io, *cache, "--row", "be_st", "--tuned", str(tmp_path / "t"), *out],
             ["stages/hybrid_biencoder.py", *io, "--models", str(d / "models"),
              "--baselines", str(d / "baselines.json"), "--metrics", str(tmp_path / "m" / "hybrids_biencoder.json"),
              "--ranks", str(tmp_path / "r" / "hybrids_biencoder_ranks.csv")]]
    for s in steps:  # each stage's main in this process (tests/_stagerun.py)
        r = run_stage_here(root / s[0], s[1:], root, {"CONTRASTLAB_MLFLOW": "0"})
        assert r.returncode == 0, f"{s[0]}: {r.stderr[-2000:]}"
    a = json.loads((tmp_path / "m" / "be_a.json").read_text())
    st = json.loads((tmp_path / "m" / "be_st.json").read_text())
    assert a["tuned"] is True and st["tuned"] is False and a["n_seeds"] == 2 and a["corpus_size"] == n
    assert a["per_seed"][0]["tokens"] == st["per_seed"][0]["tokens"]  # the same pairs
    assert 0 <= a["rank_at_1"] <= a["rank_at_10"] <= 1 and "sentence-transformers" in st["title"]
    ranks = pd.read_csv(tmp_path / "r" / "be_a_ranks.csv")
    assert len(ranks) == 2 * 4 and ranks["rank"].between(1, n).all()
    h = json.loads((tmp_path / "m" / "hybrids_biencoder.json").read_text())
    assert set(h["hybrids"]) == {"rrf_be_a", "fusion_be_a", "rrf_be_st", "fusion_be_st"}
    from contrastlab.biencoder.index import search_signatures

    hits = search_signatures(d / "models" / "be_a" / "index", [sigs[12]], k=n)
    assert sorted(h["id"] for h in hits[0]) == list(range(n))
