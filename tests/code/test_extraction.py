"""Function extraction on real files, including files that do not decode or parse; dedup; splits."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from contrastlab.data.functions import body_hash, extract_file, extract_repositories
from contrastlab.data.repos import fetch_dist
from contrastlab.data.splits import split_by_repository

GOOD = '''
import os


@property
def decorated(self):
    """Docstring."""
    a = 1
    b = 2
    return a + b


class K:
    async def method(self, x: int) -> int:
        y = x + 1
        y *= 2
        return y

    def short(self):
        return 1
'''


def _write_repo(root: Path, name: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def test_extract_file_records():
    recs = {r["qualname"]: r for r in extract_file(GOOD)}
    assert set(recs) == {"decorated", "K.method", "K.short"}
    d = recs["decorated"]
    assert d["signature"] == "@property\ndef decorated(self):"
    assert d["body"] == "a = 1\nb = 2\nreturn a + b"
    assert (d["lineno"], d["end_lineno"]) == (5, 10)
    assert recs["K.method"]["signature"] == "async def method(self, x: int) -> int:"
    with_doc = {r["qualname"]: r for r in extract_file(GOOD, include_docstring=True)}
    assert with_doc["decorated"]["signature"].endswith('"""Docstring."""')
    assert with_doc["decorated"]["body"] == d["body"]


def test_repositories_skip_undecodable_unparsable_and_dedupe(tmp_path):
    real = Path(json.__file__).with_name("decoder.py")  # a real stdlib source file
    _write_repo(tmp_path, "alpha", {
        "pkg/good.py": GOOD.encode(),
        "pkg/real_decoder.py": real.read_bytes(),
        "pkg/latin1.py": "def f():\n    s = 'caf\xe9'\n    t = s\n    return t\n".encode("latin-1"),
        "pkg/broken.py": b"def f(:\n    return 1\n",
        "tests/test_x.py": GOOD.encode(),
    })
    # beta holds the same bodies with other spacing: duplicates across repositories
    _write_repo(tmp_path, "beta", {"b.py": GOOD.replace("a + b", "a  +  b").encode()})
    df, stats = extract_repositories(tmp_path, ["alpha", "beta"], min_body_lines=3)
    sk = stats["skipped"]
    assert sk["undecodable"] == 1 and sk["unparsable"] == 1 and sk["test_file"] == 1
    assert stats["skipped_paths"] == {"test_file": ["alpha/tests/test_x.py"],
                                      "undecodable": ["alpha/pkg/latin1.py"],
                                      "unparsable": ["alpha/pkg/broken.py"]}
    assert sk["too_short"] >= 1  # K.short
    assert sk["duplicate_body_across_repos"] == 2  # decorated and K.method again in beta
    assert stats["per_repository"]["beta"]["kept"] == 0
    assert {"JSONDecoder.decode", "JSONDecoder.raw_decode"} <= set(df["qualname"])  # from the real stdlib file
    assert df["body_hash"].is_unique
    assert list(df["id"]) == list(range(len(df)))
    assert body_hash("a  =\n 1") == body_hash("a = 1")


def test_forked_workers_give_the_same_functions_and_stats(tmp_path):
    """Parsing in forked workers changes nothing: the cross-repository deduplication and the
    per-repository cap still run in sorted order in the parent. Functions nested in
    statements (if/try/with/match) are found; a def inside an expression cannot exist."""
    nested = ("def outer():\n    if True:\n        try:\n            def deep():\n"
              "                x = 1\n                y = 2\n                return x + y\n"
              "        finally:\n            pass\n    return deep\n")
    for r in range(4):
        _write_repo(tmp_path, f"r{r}", {
            "m.py": GOOD.encode(), "n.py": nested.encode(),
            **{f"k{i}.py": BODY.format(i=10 * r + i).encode() for i in range(12)}})
    names = [f"r{r}" for r in (3, 1, 0, 2)]
    one = extract_repositories(tmp_path, names, max_functions_per_repo=9, workers=1)
    two = extract_repositories(tmp_path, names, max_functions_per_repo=9, workers=3)
    pd.testing.assert_frame_equal(one[0], two[0])
    assert one[1] == two[1]
    assert [r["qualname"] for r in extract_file(nested)] == ["outer", "outer.<locals>.deep"]
    assert one[1]["skipped"]["duplicate_body_across_repos"] > 0  # GOOD repeats in r1..r3
    assert one[1]["skipped"]["over_repo_cap"] > 0
    with pytest.raises(FileNotFoundError, match="run fetch_repos"):
        extract_repositories(tmp_path, ["r0", "missing"], workers=2)


BODY = "def f{i}():\n    a = 1\n    b = a + {i}\n    return b\n"


def test_non_regular_files_encodings_and_skipped_paths(tmp_path, monkeypatch):
    """A directory named x.py, a symlink to /dev/zero and a FIFO are skipped (never opened);
    a PEP 263 latin-1 file and a UTF-8 BOM file are read in their encodings; an unknown
    codec is undecodable; an OS error while reading is a skip reason; every skipped file is
    listed under its reason."""
    import os

    from contrastlab.data import functions as fx

    _write_repo(tmp_path, "r", {
        "dir.py/inner.py": BODY.format(i=1).encode(),       # a directory named *.py
        "latin.py": ("# -*- coding: latin-1 -*-\n" + BODY.format(i=2).replace(
            "a = 1", "a = 'caf\xe9'")).encode("latin-1"),
        "bom.py": b"\xef\xbb\xbf" + BODY.format(i=3).encode(),
        "nocookie.py": BODY.format(i=4).replace("a = 1", "a = 'caf\xe9'").encode("latin-1"),
        "badcodec.py": b"# coding: no-such-codec\n" + BODY.format(i=5).encode(),
        "ioerr.py": BODY.format(i=6).encode(),
    })
    os.symlink("/dev/zero", tmp_path / "r" / "zero.py")
    os.mkfifo(tmp_path / "r" / "fifo.py")
    real_open = open

    def flaky_open(path, *a, **k):
        if str(path).endswith("ioerr.py"):
            raise OSError(5, "Input/output error", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(fx, "open", flaky_open, raising=False)
    df, stats = extract_repositories(tmp_path, ["r"], min_body_lines=3)
    assert set(df["qualname"]) == {"f1", "f2", "f3"}
    assert "caf\xe9" in df.set_index("qualname").loc["f2", "body"]
    assert stats["skipped_paths"] == {
        "not_regular_file": ["r/dir.py", "r/fifo.py", "r/zero.py"],
        "os_error": ["r/ioerr.py"],
        "undecodable": ["r/badcodec.py", "r/nocookie.py"],
    }
    assert stats["skipped"]["not_regular_file"] == 3 and stats["per_repository"]["r"]["os_error"] == 1
    assert fx.read_source(tmp_path / "r" / "zero.py") == (None, "not_regular_file")
    assert fx.read_source(tmp_path / "r" / "missing.py") == (None, "os_error")


def test_split_no_repo_in_two_splits_and_no_shared_body(tmp_path):
    names = ["requests", "click", "jinja2", "tqdm", "attrs", "pluggy", "packaging"]
    for n in names:
        fetch_dist(n, tmp_path / n)
    df, stats = extract_repositories(tmp_path, names, max_functions_per_repo=40)
    assign = split_by_repository(df["repo"].value_counts().to_dict(), (0.8, 0.1, 0.1), seed=42)
    df["split"] = df["repo"].map(assign)
    assert set(df["split"]) == {"train", "val", "test"}
    assert (df.groupby("repo")["split"].nunique() == 1).all()
    norm = df.groupby("body_hash")["split"].nunique()
    assert (norm == 1).all()
    assert split_by_repository(df["repo"].value_counts().to_dict(), seed=42) == assign
    with pytest.raises(ValueError, match="at least 3"):
        split_by_repository({"a": 1, "b": 2})
