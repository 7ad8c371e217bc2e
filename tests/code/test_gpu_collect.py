"""scripts/collect_gpu_biencoder.py: the GPU route's stage outputs become the report's GPU table
(each row marked with the device, the per-seed training seconds read from the stage's own log
lines into logs/device_runs.json, a seed without its line refused)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from contrastlab.errors import InputError
from contrastlab.reporting.compute_curve import gpu_points

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("collect_gpu", ROOT / "scripts" / "collect_gpu_biencoder.py")
collect_gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collect_gpu)


def _row(metrics: Path, logs: Path, name: str, seconds: dict[int, float], r10=(0.8, 0.9)) -> None:
    per = [{"seed": s, "rank_at_10": r, "mrr": r / 2, "val_rank_at_10": r - 0.1, "final_temperature": 0.05,
            "tokens": 1000} for s, r in zip(seconds, r10)]
    (metrics / f"{name}.json").write_text(json.dumps({
        "lr": 1e-4, "steps": 300, "layers": "all", "max_length": 256, "batch_size": 128, "nproc": 1,
        "index": "faiss-cpu IndexFlatIP", "tuned": False, "model": "/tmp/copy", "per_seed": per}))
    (logs / f"{name}.log").write_text("Loading weights: 100%\n" + "".join(
        f"biencoder {name} seed {s}: val R@10 70.00% test R@10 80.00% ({t:g} s training, 9 tokens/s)\n"
        for s, t in seconds.items()) + f"train_biencoder {name}: test R@10 80.00%\n")


def test_rows_are_marked_and_the_seconds_come_from_the_stage_log(tmp_path):
    m, logs = tmp_path / "m", tmp_path / "logs"
    m.mkdir()
    logs.mkdir()
    _row(m, logs, "biencoder_infonce", {0: 30, 1: 50})
    (m / "baselines.json").write_text("{}")
    (m / "hybrids_biencoder.json").write_text("{}")
    (logs / "times.txt").write_text("biencoder_infonce rc=0 wall_s=120\n")
    got = collect_gpu.collect(m, logs, device="NVIDIA H200", presets=["a.yaml", "b.yaml"], note="n.",
                              model="minilm")
    assert list(got) == ["biencoder_infonce"]  # baselines and fusions are not rows
    row = json.loads((m / "biencoder_infonce.json").read_text())
    assert row["device"] == "NVIDIA H200" and row["model"] == "minilm" and row["run_note"] == "n."
    assert row["selection"] == "lr 0.0001, 300 steps as a.yaml + b.yaml declare them (no study)"
    runs = json.loads((m / "logs" / "device_runs.json").read_text())["runs"]
    assert [f["seconds"] for f in runs[0]["finals"]["biencoder_infonce"]] == [30.0, 50.0]
    assert runs[0]["row_wall_s"] == {"biencoder_infonce": 120.0} and runs[0]["presets"] == ["a.yaml", "b.yaml"]
    (p,) = gpu_points(json.loads((m / "logs" / "device_runs.json").read_text()))
    assert p["gpu_min"] == pytest.approx(40 / 60) and p["rank_at_10"] == pytest.approx(0.85)
    assert p["device"] == "NVIDIA H200" and p["steps"] == 300


def test_a_seed_without_its_log_line_or_an_empty_folder_is_refused(tmp_path):
    m, logs = tmp_path / "m", tmp_path / "logs"
    m.mkdir()
    logs.mkdir()
    with pytest.raises(InputError, match="no row metrics"):
        collect_gpu.collect(m, logs, device="d", presets=["a.yaml"])
    _row(m, logs, "biencoder_st", {0: 30, 1: 50})
    (logs / "biencoder_st.log").write_text("biencoder biencoder_st seed 0: (30 s training, 9 tokens/s)\n")
    before = (m / "biencoder_st.json").read_text()
    with pytest.raises(InputError, match=r"seed\(s\) \[1\]"):
        collect_gpu.collect(m, logs, device="d", presets=["a.yaml"])
    assert (m / "biencoder_st.json").read_text() == before and not (m / "logs").exists()


def _gpu_table_rows() -> dict[str, list[str]]:
    """The committed report's GPU table: row name -> cells."""
    text = (ROOT / "reports" / "comparison.md").read_text()
    part = text[text.index("### Bi-encoder with every layer trained, one"):]
    part = part[:part.index("\n\n", part.index("|---"))]
    return {c[0]: c for c in ([x.strip() for x in ln.strip("|").split("|")]
                              for ln in part.splitlines() if ln.startswith("| ") and "---" not in ln)}


def test_docs_gpu_reading_matches_the_committed_table():
    """docs/code.md's sentences on the GPU table: the earlier H100 numbers it quotes are within
    0.3 points of this run's rows, the 95 % confidence set holds the three score fusions and no
    row alone, and 85 % is reached by a fusion, not by a row alone."""
    doc = (ROOT / "docs" / "code.md").read_text()
    assert "gave 82.2, 82.4 and 82.6 % test Rank@10" in doc and "within 0.3 points of each" in doc
    m = ROOT / "reports" / "metrics" / "code_biencoder_gpu"
    now = [json.loads((m / f"{r}.json").read_text())["rank_at_10"]
           for r in ("biencoder_infonce", "biencoder_infonce_hardneg", "biencoder_st")]
    assert max(abs(100 * a - b) for a, b in zip(now, (82.2, 82.4, 82.6))) <= 0.3 + 1e-9
    rows = _gpu_table_rows()
    header = rows.pop("row")
    mcs, r10 = header.index("in MCS"), header.index("R@10 % [CI]")
    fusions = [r for r in rows if r.startswith("BM25 ⊕ Bi-enc")]
    alone = [r for r in rows if r.startswith("Bi-enc")]
    assert len(fusions) == 3 and len(alone) == 3
    assert all(rows[r][mcs] == "yes" for r in fusions) and all(rows[r][mcs] == "no" for r in alone)
    value = lambda r: float(rows[r][r10].split()[0])  # noqa: E731
    assert max(value(r) for r in fusions) >= 85 > max(value(r) for r in alone)
    assert "none of the rows\n  alone" in doc and "reached by the fusions (the table's BM25 ⊕ rows)" in doc
