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
    # run-dependent: returned, never written into the DVC-hashed folder
    import json

    assert "reused_shards" not in json.loads((tmp_path / "index.json").read_text())
    again = load_teacher_states(tmp_path)
    assert again["sig_states"].shape == (10, 5, 8) and again["sig_mask"][0].sum() == 3
    torch.testing.assert_close(again["body_emb"], first["body_emb"])
    calls.clear()
    write_teacher_states(tmp_path, ids, sigs, bodies, encode, **{**kw, "settings": {"layer": 2}})
    assert calls == [4, 4, 2]  # other settings: nothing reused


def test_forked_shard_workers_write_the_same_bytes(tmp_path, minilm):
    """Shards encoded in forked workers (the real MiniLM, one thread each) are byte-equal to
    shards encoded one after another, so the folder's DVC hash does not depend on workers."""
    import hashlib
    from functools import partial

    torch.set_num_threads(1)
    ids = list(range(7))
    sigs = [f"def f{i}(x, y={i}):" for i in ids]
    bodies = [f"z = x * {i}\nreturn z + y" for i in ids]
    enc = partial(minilm.encode_functions, batch_size=2, max_sig_tokens=6)
    kw = dict(settings={"model": "minilm", "layer": 3}, max_sig_tokens=6,
              hidden_size=minilm.hidden_size, shard_size=3)
    for w in (1, 2):
        write_teacher_states(tmp_path / f"w{w}", ids, sigs, bodies, enc, workers=w, **kw)

    def digests(d):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}

    one, two = digests(tmp_path / "w1"), digests(tmp_path / "w2")
    assert len(one) == 4 and one == two  # 3 shards + index.json
    assert not (tmp_path / ".w2.partial").exists()


_KILLED_WRITER = r'''
import os, signal, sys
from pathlib import Path
import safetensors.torch as st
import torch
from contrastlab.data.teacher_states import write_teacher_states

real_save, calls = st.save_file, []

def dying_save(tensors, filename, metadata=None):
    calls.append(filename)
    if len(calls) == 2:  # second shard: half a file on disk, then killed by a signal
        with open(filename, "wb") as fh:
            fh.write(b"\0" * 1000)
            fh.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    real_save(tensors, filename, metadata=metadata)

st.save_file = dying_save

def encode(sigs, bodies):
    g = torch.Generator().manual_seed(len(sigs))
    return ([torch.randn(3, 8, generator=g).half() for _ in sigs], torch.randn(len(sigs), 8, generator=g))

ids = list(range(10))
write_teacher_states(Path(sys.argv[1]), ids, [f"def f{i}():" for i in ids], [f"return {i}" for i in ids],
                     encode, settings={"model": "x"}, max_sig_tokens=5, hidden_size=8, shard_size=4)
'''


def test_kill_mid_shard_leaves_only_finished_shards(tmp_path):
    """A SIGKILL while the second shard is being written: the persisted folder holds only the
    finished first shard (the half-written file lies outside it), and the rerun cleans up,
    keeps that shard, and writes an index.json without run-dependent fields."""
    import subprocess
    import sys

    out = tmp_path / "teacher"
    (out).mkdir()
    (out / ".shard_00009.safetensors.abc.safetensors").write_bytes(b"stale temp of an old run")
    r = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(out)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == -9, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["shard_00000.safetensors"]
    assert any((tmp_path / ".teacher.partial").iterdir())  # the half-written shard lies outside
    calls = []

    def encode(sigs, bodies):
        calls.append(len(sigs))
        g = torch.Generator().manual_seed(len(sigs))
        return ([torch.randn(3, 8, generator=g).half() for _ in sigs], torch.randn(len(sigs), 8, generator=g))

    ids = list(range(10))
    idx = write_teacher_states(out, ids, [f"def f{i}():" for i in ids], [f"return {i}" for i in ids],
                               encode, settings={"model": "x"}, max_sig_tokens=5, hidden_size=8,
                               shard_size=4)
    assert calls == [4, 2] and idx["reused_shards"] == 1
    assert sorted(p.name for p in out.iterdir()) == ["index.json", "shard_00000.safetensors",
                                                     "shard_00001.safetensors", "shard_00002.safetensors"]
    assert not (tmp_path / ".teacher.partial").exists()
    index_text = (out / "index.json").read_text()
    assert "reused" not in index_text
    assert load_teacher_states(out)["body_emb"].shape == (10, 8)
    # a fresh run from nothing gives byte-identical files (the folder's hash does not depend
    # on whether the run resumed)
    fresh = tmp_path / "fresh"
    write_teacher_states(fresh, ids, [f"def f{i}():" for i in ids], [f"return {i}" for i in ids],
                         encode, settings={"model": "x"}, max_sig_tokens=5, hidden_size=8, shard_size=4)
    for p in out.iterdir():
        assert (fresh / p.name).read_bytes() == p.read_bytes(), p.name


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
