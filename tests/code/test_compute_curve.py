"""The compute curve (scripts/compute_curve.py) on a tiny real corpus and a tiny random BERT, and
its report pieces (contrastlab.reporting.compute_curve).

Checked: each point keeps the learning rate with the best validation MRR and records the
Rank@10 margin over the runner-up; the test repositories are scored once a point (for the kept
model only); the CPU minutes add up; a rerun skips the points already written; the finding
sentence says whether and where a point reaches BM25.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
N = 16  # functions: 10 train, 3 val, 3 test


def _curve_module():
    sys.path.insert(0, str(ROOT / "scripts"))
    import compute_curve

    return compute_curve


def _inputs(d: Path) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_biencoder import save_tiny_model  # this folder

    save_tiny_model(d / "model")
    sigs = [f"def f{i}(x{i}, n):" for i in range(N)]
    bodies = [f"return x{i} * {i} + n" if i % 2 else f"return [x{i}] * n" for i in range(N)]
    split = ["train"] * 10 + ["val"] * 3 + ["test"] * 3
    pd.DataFrame({"id": range(N), "signature": sigs, "body": bodies, "repo": [f"r{i % 4}" for i in range(N)],
                  "path": "m.py", "qualname": [f"f{i}" for i in range(N)]}).to_parquet(d / "functions.parquet")
    pd.DataFrame({"id": range(N), "split": split, "repo_group": [f"r{i % 4}" for i in range(N)],
                  "dup_group": range(N)}).to_parquet(d / "splits.parquet")
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    be = {**raw["code"]["biencoder"], "model": str(d / "model"), "batch_size": 4, "sub_batch": 4,
          "batch_size_encode": 8, "device": "cpu", "bf16": "off", "threads": 1}
    (d / "params.yaml").write_text(yaml.safe_dump({"code": {**raw["code"], "biencoder": be}}))
    return {"--params": d / "params.yaml", "--functions": d / "functions.parquet",
            "--splits": d / "splits.parquet"}


@pytest.mark.slow
def test_curve_picks_on_validation_and_scores_test_once(tmp_path, monkeypatch):
    import contrastlab.biencoder.run as run

    cc = _curve_module()
    args = [str(x) for kv in _inputs(tmp_path).items() for x in kv]
    out = tmp_path / "curve.json"
    calls = []
    real = run.score_row

    def counting(q, c, rows, k, dev):
        calls.append(len(rows))
        return real(q, c, rows, k, dev)

    monkeypatch.setattr(run, "score_row", counting)
    cc.main([*args, "--out", str(out), "--lrs", "1e-5", "3e-3", "--points", "1:2:16", "all:2:16"])
    cur = json.loads(out.read_text())
    assert [(p["layers"], p["steps"], p["max_length"]) for p in cur["points"]] == [("1", 2, 16), ("all", 2, 16)]
    assert calls == [3, 3, 3] * 2  # two validation scorings and one test scoring a point
    for p in cur["points"]:
        cands = p["candidates"]
        assert [c["lr"] for c in cands] == [1e-5, 3e-3]
        best = max(cands, key=lambda c: c["val"]["mrr"])
        other = [c for c in cands if c is not best][0]
        assert p["lr"] == best["lr"] and p["val"] == best["val"]
        assert p["margin_val_hits_at_10"] == best["val"]["hits_at_10"] - other["val"]["hits_at_10"]
        assert 0 <= p["test"]["rank_at_10"] <= 1 and p["test"]["n"] == 3
        assert p["total_cpu_min"] == pytest.approx(p["cache_cpu_min"] + p["train_cpu_min"] + p["select_cpu_min"])
        assert p["train_cpu_min"] > 0 and p["pairs_seen"] == 2 * 4
    before = out.read_text()
    calls.clear()
    cc.main([*args, "--out", str(out), "--lrs", "1e-5", "3e-3", "--points", "1:2:16"])
    assert calls == [] and json.loads(out.read_text())["points"] == json.loads(before)["points"]


def _point(layers, steps, tokens, test, total):
    return {"layers": layers, "steps": steps, "max_length": tokens, "lr": 1e-4,
            "val": {"rank_at_10": 0.5, "mrr": 0.4, "hits_at_10": 447, "n": 894},
            "test": {"rank_at_10": test, "mrr": test / 2, "hits_at_10": 0, "n": 1477},
            "margin_val_hits_at_10": 3, "cache_cpu_min": 1.0, "train_cpu_min": total - 2.0,
            "select_cpu_min": 1.0, "total_cpu_min": total}


def test_finding_names_the_cheapest_point_at_bm25_or_the_shortfall(tmp_path):
    from contrastlab.reporting.compute_curve import curve_finding, curve_plot, curve_table

    bm25 = {"value": 0.735, "low": 0.70, "high": 0.77, "label": "BM25"}
    below = {"points": [_point("1", 24, 64, 0.60, 3.0), _point("all", 96, 64, 0.70, 40.0)],
             "config": {"batch_size": 32, "lrs": [7e-5, 2.2e-4], "n_val": 894}}
    s = curve_finding(below, bm25)
    assert s.startswith("No CPU budget measured reaches BM25 (73.5 %)")
    assert "every layer, 96 steps, 64 tokens" in s and "-3.5 points" in s and "40 CPU-minutes" in s
    above = {"points": [*below["points"], _point("2", 400, 128, 0.74, 90.0), _point("all", 400, 64, 0.75, 55.0)],
             "config": below["config"]}
    s = curve_finding(above, bm25)
    assert "every layer, 400 steps, 64 tokens" in s and "within the 60-minute aim" in s
    assert "BM25's 95 % CI [70.0, 77.0] contains it" in s  # 75.0 %: one seed, not significant
    assert "excludes it" in curve_finding(above, {**bm25, "high": 0.745})
    t = curve_table(above)
    assert [r[-1] for r in t.rows] == ["3.0", "40.0", "55.0", "90.0"]  # cheapest first
    assert t.rows[0][3] == "+3 (fragile)"  # 3 of 894 validation queries: under 1 %
    wide = {**above, "points": [{**p, "margin_val_hits_at_10": 12} for p in above["points"]]}
    assert curve_table(wide).rows[0][3] == "+12"
    plot = curve_plot(above, bm25, [{"row": "r", "device": "NVIDIA H100", "steps": 300,
                                     "rank_at_10": 0.82, "gpu_min": 0.5, "n_seeds": 2}])
    plot.draw(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0 and (tmp_path / "c.svg").read_text().startswith("<?xml")
    assert curve_plot({"points": []}, bm25, []).draw(tmp_path / "none.png") is False
    assert not (tmp_path / "none.png").exists()


def test_docs_state_the_committed_finding():
    """docs/code.md states the finding the report generated from the committed curve (the
    report's code section, ``Compute curve: ...``), and that finding names the curve's points."""
    curve_f, report_f = ROOT / "reports/metrics/code_compute_curve/curve.json", ROOT / "reports/comparison.md"
    if not curve_f.exists() or not report_f.exists():
        pytest.skip("no committed curve or report in this tree")
    finding = next((ln.split("Compute curve: ", 1)[1] for ln in report_f.read_text().splitlines()
                    if ln.startswith("Compute curve: ")), None)
    assert finding, "the report's code section has no compute-curve finding"
    pts = json.loads(curve_f.read_text())["points"]
    assert any(f"{100 * p['test']['rank_at_10']:.1f} % in {p['total_cpu_min']:.0f} CPU-minutes" in finding
               for p in pts)
    doc = " ".join((ROOT / "docs/code.md").read_text().split())
    assert finding in doc
    import re  # every "<Rank@10> % in <minutes> CPU-minutes" the page states is a committed point
    stated = re.findall(r"(\d+\.\d) % in (\d+) CPU-minutes", doc)
    have = {(f"{100 * p['test']['rank_at_10']:.1f}", f"{p['total_cpu_min']:.0f}") for p in pts}
    assert stated and set(stated) <= have, set(stated) - have


def test_cpu_preset_is_the_curves_best_validation_budget_under_an_hour():
    """presets/code-biencoder-cpu.yaml trains the budget of the committed curve with the best
    validation Rank@10 among those under 60 CPU-minutes (the aim of issue 56), with that budget's
    validation-picked learning rate; applied to params.yaml it validates and keeps one row."""
    from contrastlab.params import load_params
    from contrastlab.params.presets import apply_to_text, read_override

    curve = json.loads((ROOT / "reports/metrics/code_compute_curve/curve.json").read_text())
    ok = [p for p in curve["points"] if p["total_cpu_min"] <= 60]
    best = max(ok, key=lambda p: (p["val"]["rank_at_10"], -p["total_cpu_min"]))
    text = apply_to_text((ROOT / "params.yaml").read_text(),
                         *read_override(ROOT / "presets/code-biencoder-cpu.yaml"))
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "params.yaml").write_text(text)
        be = load_params(Path(d) / "params.yaml").code.biencoder
    assert (str(be.layers), be.steps, be.max_length) == (best["layers"], best["steps"], best["max_length"])
    (row,) = be.rows.values()
    assert row.lr == pytest.approx(best["lr"]) and row.loss == curve["config"]["loss"]
    assert row.temperature == pytest.approx(curve["config"]["temperature"])
    assert be.batch_size == curve["config"]["batch_size"]


def test_cpu_preset_paragraph_states_the_committed_numbers(tmp_path):
    """docs/code.md's generated paragraph reads the summary's ``more`` entry, the row's metrics,
    the timings and the fusion; without results it says how to get them; its interval appears
    only with a simulated coverage in the target."""
    import shutil

    from contrastlab.reporting.compute_curve import render_cpu_preset

    assert "No results of the CPU-budget preset yet" in render_cpu_preset(tmp_path)
    for rel in ("reports/metrics/code_biencoder_cpu", ):
        shutil.copytree(ROOT / rel, tmp_path / rel)
    (tmp_path / "reports/metrics/code_biencoder_cpu/logs").mkdir(exist_ok=True)
    (tmp_path / "reports/metrics/code_biencoder_cpu/logs/timings.json").write_text(json.dumps(
        {"cache": {"cpu_s": 120.0}, "train_biencoder_infonce": {"cpu_s": 3 * 600.0}}))
    a = {"best_loss_value": 0.7775, "baseline_label": "BM25", "baseline_value": 0.7346, "delta": 0.0429,
         "delta_low": 0.0128, "delta_high": 0.0721, "p": 0.0107, "p_floor": 0.0047, "verdict": "above"}
    (tmp_path / "reports/summary.json").write_text(json.dumps({"answer": {"code": {"more": [a]}}}))
    for cov, ci in ((0.96, "+4.3 [+1.3, +7.2] points"), (0.90, "+4.3° points")):
        (tmp_path / "reports/metrics/coverage.json").write_text(json.dumps({"delta": {"code_more1": cov}}))
        text = render_cpu_preset(tmp_path)
        assert ci in text and "77.8 % test Rank@10 over 3 seeds" in text and "significantly above" in text
        assert "A seed costs 10 CPU-minutes" in text and "2 more), within the 60-minute aim" in text
    h = json.loads((ROOT / "reports/metrics/code_biencoder_cpu/hybrids_biencoder.json").read_text())
    f = h["hybrids"]["fusion_biencoder_infonce"]
    assert f"reaches {100 * f['rank_at_10']:.1f} %" in text
