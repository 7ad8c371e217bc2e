"""docs/multilabel.md's preset sections (bibtex, tmc2007-500 on all rows) against the committed
runs: every test percentage the prose quotes is a committed value, and the generated
subsample-vs-all-rows tables restate the runs they name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contrastlab.reporting.multilabel_doc import render_tmc_full

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "multilabel.md"
METRICS = ROOT / "reports" / "metrics"

committed = pytest.mark.skipif(not (METRICS / "multilabel_tmc_full").exists() or not DOC.exists(),
                               reason="no committed preset results in this tree")


def _preset_prose() -> str:
    """The section from "### bibtex, measured" to the next "### " heading, generated blocks cut."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("### bibtex, measured"))
    j = next(k for k, ln in enumerate(lines) if k > i and ln.startswith("### "))
    text = "\n".join(lines[i:j])
    return re.sub(r"<!-- ([^/][^:]*): generated.*?<!-- /\1 -->", "", text, flags=re.S)


def _committed_values() -> set[str]:
    """The values the prose may quote, as fractions and as percentages to two decimals: each
    table file's estimates, interval ends and differences, and each run's top-level metrics
    (not per-seed values, spreads or label counts), of the presets' folders and of the
    report's tmc2007-500 / bibtex runs. About 1 in 9 two-decimal percentages is among them,
    so a mistyped or stale one fails."""
    out: set[str] = set()

    def add(x):
        if isinstance(x, float):
            out.update(f"{abs(s):.2f}" for s in (x, 100 * x))
    files = [*(METRICS / "multilabel_bibtex").rglob("*.json"),
             *(METRICS / "multilabel_tmc_full").rglob("*.json"),
             *(f for f in (METRICS / "multilabel").rglob("*.json")
               if f.name.startswith(("tmc2007-500_", "bibtex_")))]
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        if f.name.endswith("_table.json"):
            for cells in d.get("rows", {}).values():
                for c in (c for c in cells.values() if isinstance(c, dict)):
                    for k in ("mean", "ci_low", "ci_high", "delta"):
                        add(c.get(k))
        else:
            for k, v in d.items():
                if not re.search(r"seed|std|labels", k):
                    add(v)
    return out


@committed
def test_every_percentage_the_preset_prose_quotes_is_a_committed_value():
    prose = _preset_prose()
    assert "<!-- tmc2007-500 all rows" not in prose and "| row |" not in prose  # blocks cut
    quoted = re.findall(r"(?<![\d.])[1-9]\d?\.\d{2}(?!\d)", prose)  # percentages, not p or coverage
    assert len(quoted) > 40  # the prose quotes many of its tables' numbers
    known = _committed_values()
    stale = sorted({q for q in quoted if q not in known})
    assert not stale, f"docs/multilabel.md quotes values no committed run has: {stale}"


@committed
@pytest.mark.parametrize("kind", ["default", "tuned"])
def test_subsample_vs_all_rows_tables_restate_the_runs(kind):
    table = render_tmc_full(ROOT, kind)
    assert table in DOC.read_text(encoding="utf-8")
    full = METRICS / "multilabel_tmc_full"
    sub = METRICS / "multilabel" / ("default/tmc2007-500" if kind == "default" else "")
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| row")]
    assert len(rows) == 13
    runs = [(f.name, json.loads(f.read_text())["map"])  # every run on all rows, read once
            for f in [*(full / "default").glob("*.json"), *(full / "tuned").glob("*.json")]]
    sub_map = {f.name: json.loads(f.read_text())["map"] for f in sub.glob("*.json")}
    all_map = []
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split(" | ")]
        a, b, d = re.match(r"([\d.]+) -> \**([\d.]+)\** \(([+-][\d.]+)\)", cells[1]).groups()
        all_map.append(float(b))
        # the runs whose mAP the cell shows on all rows, then their subsample partner
        hits = [(n, v) for n, v in runs if f"{100 * v:.2f}" == b]
        assert hits, f"{cells[0]}: no run on all rows has mAP {b}"
        assert any(n in sub_map and f"{100 * sub_map[n]:.2f}" == a
                   and f"{100 * (v - sub_map[n]):+.1f}" == d for n, v in hits), cells[0]
    assert all_map == sorted(all_map, reverse=True)  # rows by mAP on all rows
