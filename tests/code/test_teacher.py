"""Teacher truncation equals the full model's output_hidden_states; sharded states resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from contrastlab.data.teacher_states import load_teacher_states, write_teacher_states
from contrastlab.models.teacher import TeacherEncoder, resolve_model

TEXTS = ["def add(a, b):", "def longer_function_name(self, x: int, *args, **kwargs) -> dict:",
         "return a + b", "x"]


def _full_hidden(path: str, text: str, layer: int, add_special_tokens: bool = True) -> torch.Tensor:
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, dtype=torch.float32).eval()
    enc = tok(text, return_tensors="pt", add_special_tokens=add_special_tokens)
    with torch.no_grad():
        return model(**enc, output_hidden_states=True).hidden_states[layer][0]


@pytest.fixture(scope="module")
def minilm():
    torch.set_num_threads(1)
    return TeacherEncoder("minilm", layer=3, device="cpu")


def test_minilm_truncated_equals_full_hidden_states(minilm):
    assert len(minilm.model.encoder.layer) == 3 and minilm.hidden_size == 384
    assert not minilm.is_causal
    toks = minilm.encode_tokens(TEXTS, batch_size=3)  # batched with padding
    means = minilm.encode_mean(TEXTS, batch_size=3)
    for text, t, m in zip(TEXTS, toks, means):
        ref = _full_hidden(minilm.path, text, 3)
        assert t.dtype == torch.float16 and t.shape == ref.shape
        torch.testing.assert_close(t.float(), ref, atol=1e-2, rtol=1e-2)  # fp16 storage
        torch.testing.assert_close(m, ref.mean(0), atol=1e-5, rtol=1e-4)


def test_bad_layer_and_path():
    with pytest.raises(ValueError, match="layer"):
        TeacherEncoder("minilm", layer=7, device="cpu")
    with pytest.raises(FileNotFoundError):
        resolve_model("./no/such/folder")


@pytest.fixture(scope="module")
def tiny_causal(tmp_path_factory):
    """A randomly initialised 4-layer Qwen2 (decoder with a final norm) on disk."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2Model

    folder = tmp_path_factory.mktemp("tiny_qwen")
    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    cfg = Qwen2Config(vocab_size=tok.vocab_size, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                      architectures=["Qwen2ForCausalLM"])
    torch.manual_seed(0)
    Qwen2Model(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def test_causal_truncation_and_one_pass_functions(tiny_causal):
    enc = TeacherEncoder(tiny_causal, layer=2, device="cpu")
    assert enc.is_causal and len(enc.model.layers) == 2
    sig, body = "def add(a, b):", "return a + b"
    toks = enc.encode_tokens([sig])[0]
    ref = _full_hidden(tiny_causal, sig, 2)  # before the final norm
    torch.testing.assert_close(toks.float(), ref, atol=1e-2, rtol=1e-2)
    # last layer: output_hidden_states[-1] includes the final norm
    last = TeacherEncoder(tiny_causal, layer=None, device="cpu")
    torch.testing.assert_close(last.encode_mean([sig])[0], _full_hidden(tiny_causal, sig, 4).mean(0),
                               atol=1e-5, rtol=1e-4)
    # one pass over signature + body: the signature states do not see the body
    s_states, b_emb = enc.encode_functions([sig], [body])
    # the signature alone ends with [SEP]; in the joined text the body follows instead
    torch.testing.assert_close(s_states[0].float(), ref[:-1], atol=1e-2, rtol=1e-2)
    # the body embedding pools the joined text's body tokens only (after "\n    ")
    from contrastlab.models.teacher import causal_join, causal_token_spans

    text, a, b = causal_join(sig, body)
    full = _full_hidden(tiny_causal, text, 2)
    offs = enc.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    _, b0 = causal_token_spans(offs, a, b)
    torch.testing.assert_close(b_emb[0], full[b0:].mean(0), atol=1e-4, rtol=1e-3)


def test_sharded_states_resume(tmp_path):
    calls = []

    def encode(sigs, bodies):
        calls.append(len(sigs))
        g = torch.Generator().manual_seed(len(sigs))
        return ([torch.randn(3 + i % 4, 8, generator=g).half() for i in range(len(sigs))],
                torch.randn(len(sigs), 8, generator=g))

    ids = list(range(10))
    sigs = [f"def f{i}():" for i in ids]
    bodies = [f"return {i}" for i in ids]
    kw = dict(settings={"model": "x", "layer": 1}, max_sig_tokens=5, hidden_size=8, shard_size=4)
    write_teacher_states(tmp_path, ids, sigs, bodies, encode, **kw)
    assert calls == [4, 4, 2]
    first = load_teacher_states(tmp_path)
    # interruption: one shard lost, one shard from other settings
    (tmp_path / "shard_00001.safetensors").unlink()
    calls.clear()
    idx = write_teacher_states(tmp_path, ids, sigs, bodies, encode, **kw)
    assert calls == [4] and idx["reused_shards"] == 2
    again = load_teacher_states(tmp_path)
    assert again["sig_states"].shape == (10, 5, 8) and again["sig_mask"][0].sum() == 3
    torch.testing.assert_close(again["body_emb"], first["body_emb"])
    calls.clear()
    write_teacher_states(tmp_path, ids, sigs, bodies, encode, **{**kw, "settings": {"layer": 2}})
    assert calls == [4, 4, 2]  # other settings: nothing reused


def test_causal_join_keeps_newline_and_indentation():
    from transformers import AutoTokenizer

    from contrastlab.models.teacher import causal_join, causal_token_spans

    sig = "def f(x: int) -> int:"
    body = "if x:\n    return 1\nreturn 2"
    text, sig_end, body_start = causal_join(sig, body)
    assert text == "def f(x: int) -> int:\n    if x:\n        return 1\n    return 2"
    assert text[:sig_end] == sig and text[sig_end:body_start] == "\n    "
    assert text[body_start:].startswith("if x:")
    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    offs = tok(text, return_offsets_mapping=True)["offset_mapping"]
    n_sig, b0 = causal_token_spans(offs, sig_end, body_start)
    # signature tokens end before the body, body pooling starts at the body's first token
    assert all(a < sig_end for a, _ in offs[1:n_sig]) and offs[b0][0] == body_start
    assert all(a >= body_start for a, b in offs[b0:] if b > a)
