"""Atomic writes and checksum verification."""

import hashlib

import pandas as pd
import pytest

from contrastlab.io import (atomic_dir, atomic_path, read_json, verify_sha256sums, write_json,
                            write_parquet)


def test_atomic_path_keeps_old_file_on_failure(tmp_path):
    f = tmp_path / "out.json"
    write_json(f, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(f) as tmp:
            tmp.write_text("half a fi")
            raise RuntimeError("interrupted")
    assert read_json(f) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temp left behind


def test_atomic_dir_replaces_whole(tmp_path):
    d = tmp_path / "shards"
    with atomic_dir(d) as t:
        (t / "a").write_text("1")
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(d) as t:
            (t / "b").write_text("2")
            raise KeyboardInterrupt
    assert sorted(p.name for p in d.iterdir()) == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


def test_write_json_is_byte_stable(tmp_path):
    write_json(tmp_path / "a.json", {"b": 1, "a": 2.5})
    write_json(tmp_path / "b.json", {"a": 2.5, "b": 1})
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_parquet_roundtrip(tmp_path):
    df = pd.DataFrame({"x": [1, 2], "y": ["a", "b"]})
    write_parquet(tmp_path / "t.parquet", df)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "t.parquet"), df)


def test_verify_sha256sums(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"hello")
    digest = hashlib.sha256(b"hello").hexdigest()
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{digest}  f.bin\n")
    verify_sha256sums(tmp_path, sums)
    (tmp_path / "f.bin").write_bytes(b"hellO")
    with pytest.raises(ValueError, match=r"f\.bin: SHA-256 mismatch"):
        verify_sha256sums(tmp_path, sums)
    (tmp_path / "f.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"f\.bin"):
        verify_sha256sums(tmp_path, sums)


def test_atomic_files_get_usual_permissions(tmp_path):
    import os
    import stat

    write_json(tmp_path / "m.json", {"a": 1})
    mode = stat.S_IMODE(os.stat(tmp_path / "m.json").st_mode)
    mask = os.umask(0)
    os.umask(mask)
    assert mode == 0o666 & ~mask
