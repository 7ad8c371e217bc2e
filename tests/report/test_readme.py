"""The README's answer table is generated from reports/summary.json and agrees with it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contrastlab.reporting import readme

ROOT = Path(__file__).resolve().parents[2]


def _answer(**over) -> dict:
    a = {"title": "Graph", "metric": "test accuracy", "scale": 100.0, "unit": "%",
         "best_loss": "mixco", "best_loss_label": "MixCo", "best_loss_value": 0.8168,
         "strongest_baseline": "sgc", "baseline_label": "SGC", "baseline_value": 0.812,
         "delta": 0.0048, "delta_low": -0.017, "delta_high": 0.025, "p": 1.0, "verdict": "level"}
    return {**a, **over}


committed = pytest.mark.skipif(not (ROOT / "reports" / "summary.json").exists()
                               or not (ROOT / "README.md").exists(),
                               reason="no committed results in this tree (a copy of the code)")


@committed
def test_committed_readme_block_is_generated_from_the_committed_summary():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.render_block(ROOT / "reports") in text, (
        "README's answer table differs from reports/summary.json: run "
        "`python -m contrastlab.reporting.readme`")
    # the block is on the first screen: before the long sections
    assert text.index(readme.BEGIN) < text.index("## The tracks")


@committed
def test_every_answer_entry_has_a_row_with_its_numbers():
    summary = json.loads((ROOT / "reports" / "summary.json").read_text())
    table = readme.answer_table(summary)
    rows = table.splitlines()[2:]
    n_secondary = sum("secondary" in a for a in summary["answer"].values())
    assert len(rows) == len(summary["answer"]) + n_secondary
    for a in summary["answer"].values():
        for p in [a] + ([{**a, **a["secondary"]}] if "secondary" in a else []):
            cell = f"{p['best_loss_label']} {100 * p['best_loss_value']:.1f} %"
            assert any(cell in r for r in rows), cell
            if "n_panels" not in p:  # the CI contains its difference
                assert p["delta_low"] <= p["delta"] <= p["delta_high"]


def test_row_states_difference_ci_and_verdict():
    t = readme.answer_table({"answer": {"graph": _answer()}})
    row = t.splitlines()[2]
    assert "| SGC 81.2 % | MixCo 81.7 % | +0.5 [-1.7, +2.5] | level, not significant" in row
    below = readme.answer_table({"answer": {"graph": _answer(
        delta=-0.05, delta_low=-0.08, delta_high=-0.02, p=0.001, verdict="below")}})
    assert "-5.0 [-8.0, -2.0] | below, significantly" in below
    # a verdict that disagrees with the numbers is a different table
    assert readme.answer_table({"answer": {"graph": _answer(verdict="above")}}) != t


def test_check_mode_fails_on_a_stale_readme(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "summary.json").write_text(json.dumps({"answer": {"graph": _answer()}}))
    (reports / "comparison.md").write_text("# r\n\n![fig](figures/graph_comparison.svg)\n")
    md = tmp_path / "README.md"
    md.write_text(f"# x\n\n{readme.BEGIN}\n| old | table |\n{readme.END}\n\n## The tracks\n")
    assert readme.main(["--readme", str(md), "--reports", str(reports), "--check"]) == 1
    assert readme.main(["--readme", str(md), "--reports", str(reports)]) == 0
    assert readme.main(["--readme", str(md), "--reports", str(reports), "--check"]) == 0
    text = md.read_text()
    assert "MixCo 81.7 %" in text and "reports/figures/graph_comparison.svg" in text
    assert re.search(r"## The tracks\n$", text)
    md.write_text("# no block\n")
    assert readme.main(["--readme", str(md), "--reports", str(reports)]) == 2
