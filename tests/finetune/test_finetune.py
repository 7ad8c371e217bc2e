"""Fine-tuning library: cached lower layers, frozen path, a training step, splits."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from contrastlab.errors import InputError
from contrastlab.finetune.data import (PKSampler, label_matrix, label_names, make_splits,
                                       strip_docstrings)
from contrastlab.finetune.encoder import FinetuneEncoder, pad_states
from contrastlab.finetune.train import Inputs, embed_inputs, knn_purity, train_encoder
from contrastlab.params.finetune import FinetuneParams


def _texts(snippets):
    return [s for _, _, s in snippets]


def _reference(enc, texts):
    """Full model forward (HF's own BertModel.forward, every block run), mean pool, head."""
    input_ids, mask = enc._ids_batch(enc.tokenize(texts))
    h = enc.backbone(input_ids=input_ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).float()
    return enc.project((h * m).sum(1) / m.sum(1))


def test_cached_lower_layers_equal_full_model(tiny_bert, tokenizer, snippets):
    texts = _texts(snippets)
    enc_full = FinetuneEncoder(tiny_bert(0), layers=1, proj_dim=8, proj_hidden=16, tokenizer=tokenizer)
    enc_cache = FinetuneEncoder(tiny_bert(0), layers=1, proj_dim=8, proj_hidden=16, tokenizer=tokenizer)
    enc_cache.head.load_state_dict(enc_full.head.state_dict())
    # the lower block is frozen in both; only the top block and the head train
    assert all(not p.requires_grad for p in enc_full.blocks[0].parameters())
    assert all(p.requires_grad for p in enc_full.blocks[1].parameters())
    z_full = _reference(enc_full, texts)
    states = enc_cache.lower_states(enc_cache.tokenize(texts))
    h, mask = pad_states(states)
    z_cache = enc_cache.forward_states(h, mask)
    torch.testing.assert_close(z_cache, z_full, rtol=1e-5, atol=1e-6)
    w = torch.randn_like(z_full)
    (z_full * w).sum().backward()
    (z_cache * w).sum().backward()
    g_full = {n: p.grad for n, p in enc_full.named_parameters() if p.requires_grad}
    g_cache = {n: p.grad for n, p in enc_cache.named_parameters() if p.requires_grad}
    assert g_full.keys() == g_cache.keys() and any(".layer.1." in n for n in g_full)
    for n in g_full:
        torch.testing.assert_close(g_cache[n], g_full[n], rtol=1e-4, atol=1e-6)
    assert all(p.grad is None for p in enc_full.blocks[0].parameters())


def test_padding_does_not_change_embeddings(tiny_bert, tokenizer, snippets):
    enc = FinetuneEncoder(tiny_bert(1), layers=1, proj_dim=8, proj_hidden=16, tokenizer=tokenizer).eval()
    texts = _texts(snippets)
    batched = enc.encode(texts, batch_size=8)
    single = torch.cat([enc.encode([t]) for t in texts])
    torch.testing.assert_close(batched, single, rtol=1e-5, atol=1e-5)


def test_sub_batch_size_does_not_change_embeddings(tiny_bert, tokenizer, snippets):
    """``finetune.sub_batch`` only groups rows into padded passes: 1, 3 and all rows at once
    give the same embeddings (fully trained path, token ids, and cached states)."""
    texts = _texts(snippets)
    enc = FinetuneEncoder(tiny_bert(3), layers="all", proj_dim=8, proj_hidden=16, tokenizer=tokenizer)
    ids = enc.tokenize(texts)
    assert len(set(map(len, ids))) > 1  # rows of different lengths: padding happens
    inp = Inputs(ids=ids, level=0)
    outs = [embed_inputs(enc, inp, sub_batch=k) for k in (1, 3, len(texts))]
    for o in outs[1:]:
        torch.testing.assert_close(o, outs[0], rtol=1e-5, atol=1e-6)
    enc1 = FinetuneEncoder(tiny_bert(3), layers=1, proj_dim=8, proj_hidden=16, tokenizer=tokenizer)
    cached = Inputs(states=enc1.lower_states(ids), ids=ids, level=1)
    a, b = embed_inputs(enc1, cached, sub_batch=1), embed_inputs(enc1, cached, sub_batch=64)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_layers_zero_is_the_frozen_encoder(tiny_bert, tokenizer, snippets):
    texts = _texts(snippets)
    model = tiny_bert(2)
    enc = FinetuneEncoder(model, layers=0, proj_dim=0, tokenizer=tokenizer)
    assert enc.encoder_parameters() == []
    ids = enc.tokenize(texts)
    input_ids, mask = enc._ids_batch(ids)
    h = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).float()
    frozen = F.normalize((h * m).sum(1) / m.sum(1), dim=1)
    torch.testing.assert_close(enc.encode(texts), frozen, rtol=1e-5, atol=1e-6)
    # the cached states at layer L are the frozen final states
    inp = Inputs(states=enc.lower_states(ids), ids=ids, level=2)
    torch.testing.assert_close(embed_inputs(enc, inp), frozen, rtol=1e-5, atol=1e-6)


def test_bad_layers_raise(tiny_bert, tokenizer):
    with pytest.raises(InputError, match="layers must be in 0..2"):
        FinetuneEncoder(tiny_bert(0), layers=3, tokenizer=tokenizer)


def _toy(snippets, tokenizer, tiny_bert, layers=1):
    problems = np.array([p for p, _, _ in snippets])
    tiers = np.array([t for _, t, _ in snippets])
    y = label_matrix(problems, tiers, label_names(problems))
    enc = FinetuneEncoder(tiny_bert(3), layers=layers, proj_dim=8, proj_hidden=16, tokenizer=tokenizer)
    ids = enc.tokenize(_texts(snippets))
    inp = Inputs(states=enc.lower_states(ids), ids=ids, level=enc.n_frozen)
    return problems, tiers, y, enc, inp


@pytest.mark.parametrize("loss", ["mulsupcon", "all", None])
def test_training_reduces_the_loss(tiny_bert, tokenizer, snippets, loss):
    from contrastlab.losses import get_loss

    problems, tiers, y, enc, inp = _toy(snippets, tokenizer, tiny_bert)
    cfg = FinetuneParams(steps=15, batch_problems=2, batch_per_problem=4, lr_encoder=1e-3,
                         lr_head=1e-2, warmup=0.0, temperature=0.5, eval_every=100)
    rows = np.arange(len(snippets))

    def full_loss(clf=None):
        with torch.no_grad():
            enc.eval()
            z = embed_inputs(enc, inp)
            return float(get_loss(loss)(z.unsqueeze(1), y, temperature=0.5))

    if loss is None:  # BCE: the logistic layer is internal; check the embedding moved apart
        before = embed_inputs(enc, inp).clone()
        train_encoder(enc, inp, y, problems, rows, loss=None, cfg=cfg, seed=0)
        assert not torch.allclose(embed_inputs(enc, inp), before)
        return
    before = full_loss()
    r = train_encoder(enc, inp, y, problems, rows, loss=loss, cfg=cfg, seed=0)
    after = full_loss()
    assert after < before - 1e-3, (before, after)
    assert r.tokens == 15 * sum(len(s) for s in inp.states)


def test_training_is_deterministic(tiny_bert, tokenizer, snippets):
    outs = []
    for _ in range(2):
        problems, tiers, y, enc, inp = _toy(snippets, tokenizer, tiny_bert)
        cfg = FinetuneParams(steps=3, batch_problems=2, batch_per_problem=2, warmup=0.0)
        train_encoder(enc, inp, y, problems, np.arange(len(snippets)), loss="mulsupcon", cfg=cfg, seed=5)
        outs.append(embed_inputs(enc, inp))
    assert torch.equal(outs[0], outs[1])


def test_validation_keeps_the_best_state(tiny_bert, tokenizer, snippets):
    problems, tiers, y, enc, inp = _toy(snippets, tokenizer, tiny_bert)
    keys = np.array([f"{a}|{b}" for a, b in zip(problems, tiers)], dtype=object)
    cfg = FinetuneParams(steps=6, batch_problems=2, batch_per_problem=3, eval_every=2, warmup=0.0)
    # validation rows 3 (A FAIL) and 7 (B FAIL) have a same-cell training row (1 and 6)
    r = train_encoder(enc, inp, y, problems, np.array([0, 1, 2, 4, 5, 6]), loss="mulsupcon",
                      cfg=cfg, seed=0, val_idx=np.array([3, 7]), keys=keys, knn_k=1)
    assert all(0 < v <= 1 for v in r.curve["val_map"])
    assert r.curve["step"] == [2, 4, 6]
    assert r.best_val == max(r.curve["val_map"])
    assert r.best_step == r.curve["step"][int(np.argmax(r.curve["val_map"]))]
    # the pick's record: chosen = the kept step; margin in validation rows (2 here), at most
    # n_val, 0 exactly when another checked step reaches the kept step's mAP
    p = r.pick
    assert p["chosen"] == r.best_step and p["n_val"] == 2 and p["criterion"] == "validation retrieval mAP"
    others = [v for s, v in zip(r.curve["step"], r.curve["val_map"]) if s != r.best_step]
    assert (p["margin"] == 0) == (max(others) >= r.best_val - 1e-9)
    assert 0 <= p["margin"] <= 2 and p["fragile"] == (p["margin"] < 0.01 * 2)


def test_knn_purity_counts_same_keys():
    corpus = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    q = torch.tensor([[1.0, 0.05], [0.0, 1.0]])
    got = knn_purity(corpus, ["a", "a", "b"], q, ["a", "a"], 2)
    np.testing.assert_allclose(got, [1.0, 0.5])
    loo = knn_purity(corpus, ["a", "a", "b"], corpus, ["a", "a", "b"], 1, exclude_self=True)
    np.testing.assert_allclose(loo, [1.0, 1.0, 0.0])


def test_splits_hold_out_whole_problems_and_keep_cells_trained():
    rng = np.random.default_rng(0)
    problems = np.repeat([f"p{i}" for i in range(20)], 9)
    tiers = rng.choice(["PASS", "PARTIAL", "FAIL"], size=len(problems))
    s = make_splits(problems, tiers, test_problem_fraction=0.3, test_fraction=0.3,
                    val_fraction=0.15, seed=1)
    held = set(problems[s == "test_b"])
    assert len(held) == 6
    assert held.isdisjoint(problems[s != "test_b"])  # split (b): no problem on both sides
    train_cells = set(zip(problems[s == "train"], tiers[s == "train"]))
    for p, t in zip(problems[s == "test_a"], tiers[s == "test_a"]):
        assert (p, t) in train_cells
    assert set(problems[s == "test_a"]) <= set(problems[s == "train"])
    again = make_splits(problems, tiers, test_problem_fraction=0.3, test_fraction=0.3,
                        val_fraction=0.15, seed=1)
    assert (again == s).all()


def test_pk_sampler_draws_problem_groups():
    g = np.array(["a"] * 5 + ["b"] * 3 + ["c"] * 4)
    it = iter(PKSampler(g, 2, 2, torch.Generator().manual_seed(0)))
    for _ in range(5):
        b = next(it).numpy()
        assert len(b) == 4 and len(set(g[b])) == 2
        assert all((g[b] == x).sum() == 2 for x in set(g[b]))


def test_strip_docstrings_keeps_code():
    src = 'def f(x):\n    """Doc."""\n    return x + 1\n'
    out = strip_docstrings(src)
    assert "Doc" not in out and "return x + 1" in out
    with pytest.raises(InputError):
        strip_docstrings("def (")


def test_override_file_merges_and_validates(tmp_path):
    import yaml

    from contrastlab.finetune.run import load_with_overrides
    from contrastlab.params import ParamsError

    base = tmp_path / "params.yaml"
    base.write_text(yaml.safe_dump({"finetune": {"layers": 1, "steps": 60, "seeds": [0, 1, 2]}}))
    gpu = tmp_path / "gpu.yaml"
    gpu.write_text(yaml.safe_dump({"finetune": {"layers": "all", "bf16": "on"}}))
    p = load_with_overrides(base, [gpu])
    assert (p.finetune.layers, p.finetune.bf16, p.finetune.steps, p.finetune.seeds) == ("all", "on", 60, [0, 1, 2])
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"finetune": {"layers": -2}}))
    with pytest.raises(ParamsError, match="finetune.layers"):
        load_with_overrides(base, [bad])


def test_the_gpu_preset_is_a_valid_override():
    from contrastlab.finetune.run import load_with_overrides
    from contrastlab.utils import repo_root

    root = repo_root()
    p = load_with_overrides(root / "params.yaml", [root / "presets" / "finetune-gpu.yaml"])
    f = p.finetune
    assert (f.layers, f.bf16, f.nproc, f.device) == ("all", "auto", "auto", "cuda")


def test_validation_map_leave_one_out_matches_recomputation():
    from contrastlab.finetune.train import _val_map

    g = torch.Generator().manual_seed(3)
    emb = torch.randn(14, 5, generator=g)
    keys = np.array(list("aabbcabcabcxay"), dtype=object)  # rows 11, 13 ('x', 'y'): no relevant row
    tr, va = np.arange(7), np.arange(7, 14)
    m, loo = _val_map(emb[tr], emb[va], keys, tr, va)
    kept = [i for i in va if keys[i] in set(keys[tr])]
    assert len(loo) == len(kept) == 5
    for j, i in enumerate(kept):  # leaving row i out = the mAP of the other validation rows
        rest = np.array([k for k in va if k != i])
        assert loo[j] == pytest.approx(_val_map(emb[tr], emb[rest], keys, tr, rest)[0])
    assert m == pytest.approx(np.mean([_val_map(emb[tr], emb[[i]], keys, tr, np.array([i]))[0] for i in kept]))
