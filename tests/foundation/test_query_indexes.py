"""Issue 58: ``python -m contrastlab.query`` parses submissions within limits (a forked child),
accepts a UTF-8 byte-order mark, tells each index kind's flags, and serves ``--signature``
with the pipeline's best retriever (hybrid_biencoder's BM25 fusion; ``--dense``: the
bi-encoder alone). Tiny random 2-layer BERT, indexes built here (no pipeline outputs)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from contrastlab import query
from contrastlab.cli import run_stage

SIGS = ["def add(a, b):", "def read_file(path):", "def parse_json(text):", "def mean(xs):",
        "def to_upper(s):", "def fetch_url(url, timeout):", "def sort_items(items):", "def is_even(n):",
        "def write_file(path, text):", "def median(xs):", "def dump_json(obj):", "def to_lower(s):"]
BODIES = ["return a + b", "with open(path) as f:\n    return f.read()", "return json.loads(text)",
          "return sum(xs) / len(xs)", "return s.upper()", "return requests.get(url, timeout=timeout)",
          "return sorted(items)", "return n % 2 == 0", "with open(path, 'w') as f:\n    f.write(text)",
          "ys = sorted(xs)\nreturn ys[len(ys) // 2]", "return json.dumps(obj)", "return s.lower()"]
CODE = "def f(x):\n    return x + 1\n"


@pytest.fixture(scope="module")
def idx(tmp_path_factory):
    """A submissions index, a code-retrieval index (row ``tiny``) of SIGS -> BODIES, its
    functions parquet, and the encoder."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from contrastlab.biencoder.index import write_code_index
    from contrastlab.finetune.encoder import FinetuneEncoder
    from contrastlab.finetune.index import write_index
    from contrastlab.models.teacher import resolve_model

    d = tmp_path_factory.mktemp("query")
    tok = AutoTokenizer.from_pretrained(resolve_model("minilm"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    enc = FinetuneEncoder(BertModel(cfg, add_pooling_layer=False).eval(), layers=1, proj_dim=0,
                          max_length=64, tokenizer=tok).eval()
    codes = [CODE, "def g(y):\n    return y * 2\n"]
    write_index(d / "subs", enc.encode(codes), [{"id": str(i), "problem": "P", "tier": "PASS"}
                                                for i in range(2)], enc, {"variant": "v"})
    rows = [{"id": 10 + i, "signature": s, "repo": "r", "path": "m.py", "qualname": s[4:s.index("(")]}
            for i, s in enumerate(SIGS)]
    write_code_index(d / "code", enc.encode(BODIES), rows, enc, {"row": "tiny"})
    pd.DataFrame({"id": [r["id"] for r in rows][::-1], "signature": SIGS[::-1], "body": BODIES[::-1]}
                 ).to_parquet(d / "functions.parquet")  # the pipeline sorts by id; so does the CLI
    return SimpleNamespace(dir=d, subs=str(d / "subs"), code=str(d / "code"), enc=enc,
                           functions=str(d / "functions.parquet"))


def run(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        rc = run_stage(lambda: query.main(argv))
    except SystemExit as e:  # argparse
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line_error(rc, err, *words):
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error:"), (rc, err)
    assert all(w in lines[0] for w in words), (words, err)


# ------------------------------------------------------------------ parsing within limits
@pytest.mark.parametrize("code", [
    "x = " + "+".join(["a"] * 330) + "\n",       # 664 bytes: parses, the docstring stripper recursed
    "x = " + "+".join(["a"] * 100_000) + "\n",   # RecursionError in ast.parse
    "x = " + "not " * 10_000 + "a\n",            # MemoryError in ast.parse (the parser's stack)
], ids=["329+ terms", "ast.parse RecursionError", "ast.parse MemoryError"])
def test_deep_code_is_one_line_error(code, idx, tmp_path, capsys):
    f = tmp_path / "deep.py"
    f.write_text(code)
    one_line_error(*run(["--index", idx.subs, "--code", str(f)], capsys)[::2], "too deeply nested")
    f = tmp_path / "deep.jsonl"
    f.write_text(json.dumps({"code": CODE}) + "\n" + json.dumps({"code": code}) + "\n")
    one_line_error(*run(["--index", idx.subs, "--codes", str(f)], capsys)[::2], "record 1", "nested")


@pytest.mark.parametrize("limit,value,words", [("PARSE_SECONDS", 0.1, "took more than 0.1 s"),
                                               ("PARSE_MEMORY", 32 << 20, "too large")])
def test_large_code_is_refused_within_the_limits(limit, value, words, idx, tmp_path, capsys, monkeypatch):
    """A 15 MiB file took 259 s and 6.8 GB to parse; here 1 MB under scaled-down limits."""
    monkeypatch.setattr(query, limit, value)
    f = tmp_path / "big.py"
    f.write_text("".join(f"def f{i}(x):\n    '''doc'''\n    return x * {i}\n\n" for i in range(25_000)))
    t = time.monotonic()
    one_line_error(*run(["--index", idx.subs, "--code", str(f)], capsys)[::2], words)
    assert time.monotonic() - t < 5


@pytest.mark.slow
def test_a_15_mib_file_is_refused_within_the_default_limits(idx, tmp_path, capsys):
    f = tmp_path / "big.py"
    f.write_text("".join(f"def f{i}(x, y):\n    return x * y + {i}\n\n" for i in range(340_000)))
    assert 14 << 20 < f.stat().st_size < 16 << 20
    t = time.monotonic()
    one_line_error(*run(["--index", idx.subs, "--code", str(f)], capsys)[::2], "too large")
    assert time.monotonic() - t < query.PARSE_SECONDS + 10


def test_a_byte_order_mark_is_accepted(idx, tmp_path, capsys):
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + CODE.encode())
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps([{"id": "q", "code": CODE}]).encode())
    for flag, name in (("--code", "bom.py"), ("--codes", "bom.json")):
        rc, out, err = run(["--index", idx.subs, flag, str(tmp_path / name), "-k", "1", "--json"], capsys)
        assert rc == 0, err
        assert json.loads(out)[0]["neighbours"][0]["id"] == "0"


# ------------------------------------------------------------------ each index kind its flags
@pytest.mark.parametrize("argv,words", [
    (["--index", "{code}", "--code", "{py}"],
     ("error: this index is a code-retrieval index (train_biencoder@tiny): use --signature",)),
    (["--index", "{code}", "--codes", "{jsonl}"], ("code-retrieval index", "use --signature")),
    (["--index", "{subs}", "--signature", "def f(x):"],
     ("error: this index is a submissions index (finetune_index, variant v): use --code or --codes",)),
    (["--index", "{subs}", "--code", "{py}", "--dense"], ("--dense goes with --signature",)),
    (["--index", "{code}", "--signature", "def f(x):", "--functions", "{missing}"], ("no such functions",)),
    (["--index", "{code}", "--signature", "def f(x):", "--functions", "{other}"], ("not the functions",)),
])
def test_each_index_kind_names_its_flags(argv, words, idx, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(query, "METRICS", tmp_path, raising=False)
    (tmp_path / "hybrids_biencoder.json").write_text(json.dumps(
        {"hybrids": {"fusion_tiny": {"weight": 0.5, "bm25_k1": 1.2, "bm25_b": 0.75, "rank_at_10": 0.5}}}))
    (tmp_path / "a.py").write_text(CODE)
    (tmp_path / "a.jsonl").write_text(json.dumps({"code": CODE}))
    pd.DataFrame({"id": [10], "signature": ["def g():"], "body": ["pass"]}).to_parquet(tmp_path / "o.parquet")
    argv = [a.format(code=idx.code, subs=idx.subs, py=tmp_path / "a.py", jsonl=tmp_path / "a.jsonl",
                     missing=tmp_path / "none.parquet", other=tmp_path / "o.parquet") for a in argv]
    one_line_error(*run(argv, capsys)[::2], *words)


def test_signature_without_a_committed_fusion_row_points_to_dense(idx, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(query, "METRICS", tmp_path)
    one_line_error(*run(["--index", idx.code, "--signature", "def f(x):"], capsys)[::2],
                   "no fusion_tiny", "--dense")
    rc, out, err = run(["--index", idx.code, "--signature", SIGS[4], "--dense", "-k", "1"], capsys)
    assert rc == 0 and "cosine of tiny" in out, err


# ------------------------------------------------------------------ the fused retriever
def test_signature_ranks_as_the_pipelines_bm25_fusion(idx, tmp_path, capsys, monkeypatch):
    """The CLI's default ranking equals hybrid_biencoder's (fuse_with_bm25, the fusion weight it
    picked and wrote) for every test query, and is not the dense ranking."""
    import torch.nn.functional as F

    from contrastlab.evaluation.code_hybrids import fuse_with_bm25
    from contrastlab.models.code_baselines import BM25Scorer, fuse_scores

    q = F.normalize(idx.enc.encode(SIGS), dim=1).numpy()
    c = F.normalize(idx.enc.encode(BODIES), dim=1).numpy()
    va, te, n = np.arange(4), np.arange(4, len(SIGS)), len(SIGS)
    code = SimpleNamespace(baselines=SimpleNamespace(fusion_weights=[0.5], rrf_k=60))
    out, frames = fuse_with_bm25(code, {"k1": 1.2, "b": 0.75}, SIGS, BODIES, {"tiny": {0: (q[va], q[te], c)}},
                                 va, te, np.array(["r"] * n))
    monkeypatch.setattr(query, "METRICS", tmp_path)
    (tmp_path / "hybrids_biencoder.json").write_text(json.dumps({"hybrids": out}))
    argv = ["--index", idx.code, "--functions", idx.functions, "-k", str(n), "--json"]
    for s in te:
        argv += ["--signature", SIGS[s]]
    rc, stdout, err = run(argv, capsys)
    assert rc == 0, err
    got = [[h["id"] - 10 for h in r["neighbours"]] for r in json.loads(stdout)]
    want = pd.concat(frames).query("hybrid == 'fusion_tiny'")["rank"].tolist()
    assert [g.index(s) + 1 for g, s in zip(got, te)] == want
    fused = fuse_scores(BM25Scorer(BODIES, 1.2, 0.75).scores([SIGS[s] for s in te]), q[te] @ c.T, 0.5)
    assert got == np.argsort(-fused, 1, kind="stable").tolist()
    assert got != np.argsort(-(q[te] @ c.T), 1, kind="stable").tolist()


def test_help_states_the_rows_and_their_committed_rank_at_10(capsys):
    with pytest.raises(SystemExit):
        query.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    hybrids = json.loads((query.METRICS / "hybrids_biencoder.json").read_text())["hybrids"]
    rows = [n[7:] for n in hybrids if n.startswith("fusion_")]
    assert rows
    for row in rows:
        dense = json.loads((query.METRICS / f"{row}.json").read_text())["rank_at_10"]
        assert f"{row} {hybrids['fusion_' + row]['rank_at_10']:.1%} fused" in text
        assert f"{dense:.1%} --dense" in text
