"""The ° rule over the whole report: every 95 % interval a table prints has a simulated coverage
in [0.92, 0.98] at its operating point (reports/metrics/coverage.json,
bench/bench_coverage.py; the column -> key map of contrastlab.reporting.coverage_rule), and a
column without one prints its estimate alone, marked °."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contrastlab.reporting import Cell
from contrastlab.reporting import coverage_rule as rule

ROOT = Path(__file__).resolve().parents[2]
#: an interval written into a text cell: "12.34 [10.1, 14.2]"
TEXT_INTERVAL = re.compile(r"\[\s*-?\d[\d.]*%?,\s*-?\d[\d.]*%?\s*\]")


def printed_intervals(sections) -> list[tuple[str, str, str, list]]:
    """``(track, table title, column, row)`` of every cell that prints an interval."""
    out = []
    for s in sections:
        for t in s.tables:
            for r in t.rows:
                for j, c in enumerate(r[: len(t.columns)]):
                    if (c.low is not None and c.value is not None if isinstance(c, Cell)
                            else bool(TEXT_INTERVAL.search(str(c)))):
                        out.append((s.track, t.title, t.columns[j], r))
    return out


def test_the_rule_reads_coverage_json():
    cov = {"enron": {"map": 0.008, "micro_f1": 0.95, "map_min20pos": 0.93}, "medical": {"map_min40pos": 0.91}}
    assert rule.covers(cov, "enron.micro_f1") and not rule.covers(cov, "enron.map")
    assert rule.covers(cov, "enron.map_frequent") and not rule.covers(cov, "medical.map_frequent")
    assert not rule.covers(cov, "enron.macro_f1") and not rule.covers(cov, None)  # never simulated
    key = rule.coverage_key("multilabel", "Default (params.yaml, trial 0) vs tuned, on test (mAP, %)",
                            "tuned", ["ANY", "enron"])
    assert key == "enron.map"
    assert rule.coverage_key("finetune", "Split (b): unseen problems (164 queries)", "Rank@1", []) == "finetune.b_rank1"
    assert rule.coverage_key("finetune", "GPU, all layers: split (a) (100 queries)", "Rank@1", []) is None
    assert rule.coverage_key("code", "Seed-corpus preset (bash scripts/seed_corpus.sh)", "R@1 % [CI]", []) is None
    hidden = rule.strip(Cell(0.5, 0.4, 0.6), False)
    assert hidden.low is None and rule.MARK in hidden.marks
    # a cell without an interval in a column that does not cover is marked too; one that covers is kept
    assert rule.MARK in rule.strip(Cell(0.5), False).marks and rule.strip(Cell(0.5), True) == Cell(0.5)
    assert rule.strip(Cell(0.5, 0.4, 0.6), True).low == 0.4


@pytest.mark.slow
def test_every_interval_the_report_prints_has_a_covering_simulation(tmp_path, monkeypatch):
    """Builds every section from the committed results and checks each printed interval's
    column against reports/metrics/coverage.json (figures drawn but not rendered to files:
    rendering is half the build's time and this test reads only the tables)."""
    import matplotlib.pyplot as plt

    from contrastlab.reporting import style
    from contrastlab.reporting.build import collect_sections

    def no_render(fig, path, *more):
        plt.close(fig)
        for p in (path, *more):
            Path(p).touch()

    monkeypatch.setattr(style, "save", no_render)

    cov = rule.load(ROOT / "reports" / "metrics")
    if not cov:
        pytest.skip("no reports/metrics/coverage.json: run python bench/bench_coverage.py")
    sections = collect_sections(ROOT, tmp_path, tracks=("graph", "code", "multilabel", "finetune"))
    if not sections:
        pytest.skip("no committed results")
    bad = {}
    for track, title, col, row in printed_intervals(sections):
        key = rule.coverage_key(track, title, col, row)
        if not rule.covers(cov, key):
            g, _, m = (key or "").partition(".")
            bad[f"{title} | {col}"] = (key, (cov.get(g) or {}).get(m))
    assert not bad, "printed intervals without a covering simulation:\n" + "\n".join(
        f"{k}: key {key}, coverage {c}" for k, (key, c) in sorted(bad.items()))
