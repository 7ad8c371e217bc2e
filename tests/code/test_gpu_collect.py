"""scripts/collect_gpu_biencoder.py: device runs of scripts/gpu_biencoder.py become the report's
GPU table (metrics equal to the ranks, seeds merged across runs, mismatches refused)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from contrastlab.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("collect_gpu", ROOT / "scripts" / "collect_gpu_biencoder.py")
collect_gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collect_gpu)

N = 30  # functions: 12 train, 8 val, 10 test


def _corpus(d: Path) -> tuple[Path, Path]:
    split = ["train"] * 12 + ["val"] * 8 + ["test"] * 10
    repo = [f"r{i // 3}" for i in range(N)]
    pd.DataFrame({"id": np.arange(N) + 100, "repo": repo, "path": "m.py", "qualname": [f"f{i}" for i in range(N)],
                  "signature": [f"def f{i}(x):" for i in range(N)], "body": [f"return {i}" for i in range(N)]}
                 ).to_parquet(d / "f.parquet")
    pd.DataFrame({"id": np.arange(N) + 100, "repo_group": repo, "dup_group": np.arange(N), "split": split}
                 ).to_parquet(d / "s.parquet")
    m, dd = d / "m_in", d / "d_in"
    m.mkdir()
    dd.mkdir()
    (m / "baselines.json").write_text(json.dumps({"baselines": {"bm25": {"rank_at_10": 0.5}}, "corpus_size": N}))
    pd.DataFrame({"id": np.arange(20, 30) + 100, "repo": repo[20:], "baseline": "bm25", "rank": 5}
                 ).to_csv(dd / "baselines_ranks.csv", index=False)
    return d / "f.parquet", d / "s.parquet"


def _run(d: Path, seeds, choice=(1e-4, 300), rows=("biencoder_infonce", "biencoder_st")) -> Path:
    d.mkdir()
    rng = np.random.default_rng(len(seeds) + seeds[0])
    finals, recs = {}, {r: [] for r in rows}
    for s in seeds:
        for r in rows:
            for split, idx in (("val", range(12, 20)), ("test", range(20, 30))):
                recs[r] += [(s, split, i, int(rng.integers(1, 25))) for i in idx]
            finals.setdefault(r, []).append({"seed": s, "tokens": 1000, "seconds": 1.0, "temperature": 0.05})
    for r in rows:
        pd.DataFrame(recs[r], columns=["seed", "split", "row", "rank"]).to_csv(d / f"ranks_{r}.csv", index=False)
    (d / "summary.json").write_text(json.dumps({
        "device": "NVIDIA H100 80GB HBM3", "choice": {"lr": choice[0], "steps": choice[1]},
        "layers": "all", "max_length": 256, "batch_size": 128, "n_bodies": N, "n_val": 8, "n_test": 10,
        "preset": "presets/code-biencoder-gpu.yaml", "finals": finals,
        "grid": [{"lr": choice[0], "steps": choice[1], "val_rank_at_10": 0.5}]}))
    (d / "log.txt").write_text("a log line\n")
    return d


def _collect(tmp_path, runs):
    f, s = _corpus(tmp_path) if not (tmp_path / "f.parquet").exists() else (tmp_path / "f.parquet", tmp_path / "s.parquet")
    return collect_gpu.collect(runs, params=str(ROOT / "params.yaml"), functions=f, splits=s,
                               metrics_in=tmp_path / "m_in", data_in=tmp_path / "d_in",
                               metrics_out=tmp_path / "m_out", data_out=tmp_path / "d_out",
                               timings=tmp_path / "m_out" / "logs" / "runs.json")


def test_two_runs_merge_into_one_row_whose_metrics_are_its_ranks(tmp_path):
    for p in ("m_out", "d_out"):
        (tmp_path / p).mkdir()
    a, b = _run(tmp_path / "a", [0, 1]), _run(tmp_path / "b", [2])
    got = _collect(tmp_path, [a, b])
    assert sorted(got) == ["biencoder_infonce", "biencoder_st"]
    raw = pd.concat([pd.read_csv(r / "ranks_biencoder_st.csv") for r in (a, b)])
    test = raw[raw["split"] == "test"]
    m = json.loads((tmp_path / "m_out" / "biencoder_st.json").read_text())
    assert m["n_seeds"] == 3 and [p["seed"] for p in m["per_seed"]] == [0, 1, 2]
    assert m["rank_at_10"] == pytest.approx(np.mean([(g["rank"] <= 10).mean() for _, g in test.groupby("seed")]))
    assert m["val_rank_at_10"] == pytest.approx(
        np.mean([(g["rank"] <= 10).mean() for _, g in raw[raw["split"] == "val"].groupby("seed")]))
    assert m["layers"] == "all" and m["steps"] == 300 and m["lr"] == 1e-4 and m["device"].startswith("NVIDIA")
    assert "every layer" in m["title"] and "sentence-transformers" in m["title"]
    out = pd.read_csv(tmp_path / "d_out" / "biencoder_st_ranks.csv")
    assert list(out.columns) == ["id", "repo", "seed", "rank"] and len(out) == 30
    assert set(out["id"]) == set(range(120, 130))  # function ids, not row numbers
    assert (tmp_path / "m_out" / "baselines.json").read_bytes() == (tmp_path / "m_in" / "baselines.json").read_bytes()
    logs = json.loads((tmp_path / "m_out" / "logs" / "runs.json").read_text())
    assert [r["log"] for r in logs["runs"]] == [["a log line"], ["a log line"]]


def test_a_seed_in_two_runs_or_runs_with_other_choices_are_refused(tmp_path):
    for p in ("m_out", "d_out"):
        (tmp_path / p).mkdir()
    a = _run(tmp_path / "a", [0, 1])
    with pytest.raises(InputError, match="a seed appears in two runs"):
        _collect(tmp_path, [a, _run(tmp_path / "b", [1])])
    with pytest.raises(InputError, match="differ in 'choice'"):
        _collect(tmp_path, [a, _run(tmp_path / "c", [2], choice=(3e-5, 100))])
    assert not list((tmp_path / "m_out").glob("*.json"))  # nothing written


def test_the_device_scripts_exact_index_returns_what_faiss_returns():
    """scripts/gpu_biencoder.py's stand-in for faiss.IndexFlatIP (the GPU image has no faiss):
    the same neighbours and scores on random unit rows."""
    import faiss

    spec = importlib.util.spec_from_file_location("gpu_be", ROOT / "scripts" / "gpu_biencoder.py")
    gpu_be = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_be)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[:40] + 0.1 * rng.standard_normal((40, 16)).astype(np.float32)
    ref, ours = faiss.IndexFlatIP(16), gpu_be._TorchFlatIP(16)
    ref.add(x)
    ours.add(x)
    (ds, ids), (dt, it) = ref.search(q, 7), ours.search(q, 7)
    assert ours.ntotal == 300 and it.dtype == np.int64
    np.testing.assert_array_equal(ids, it)
    np.testing.assert_allclose(ds, dt, rtol=1e-5, atol=1e-6)
