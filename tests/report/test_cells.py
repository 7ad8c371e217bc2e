"""The report's one typed cell model (``contrastlab.reporting.Cell``): value, 95 % CI,
marks and source, the same in every track; an estimate outside its interval is refused."""

from __future__ import annotations

import pytest

from contrastlab.reporting import Cell, Section, Table
from contrastlab.reporting.html import cell_view, render_html


def test_text_bold_marks_and_missing():
    c = Cell(0.6671, 0.628, 0.703, scale=100, digits=2, ci_digits=1, bold=True, marks=("↑",))
    assert str(c) == "**66.71 [62.8, 70.3]** ↑"
    assert f"{c}" == str(c)  # usable in f-strings (headlines)
    assert str(Cell(0.812, 0.79, 0.83, digits=3, show_ci=False)) == "0.812"
    assert str(Cell(None)) == "-" and str(Cell(float("nan"))) == "-"
    assert str(Cell(0.5, scale=100)) == "50.00"


def test_from_stats_reads_the_summary_fields():
    st = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "in_mcs": True, "below_baseline": True}
    c = Cell.from_stats(st, scale=100, digits=1)
    assert (c.bold, c.marks, str(c)) == (True, ("↓",), "**50.0 [40.0, 60.0]** ↓")


@pytest.mark.parametrize("value,low,high", [(0.7, 0.4, 0.6), (0.3, 0.4, 0.6), (0.5, 0.6, 0.4)])
def test_an_estimate_outside_its_interval_is_refused(value, low, high):
    with pytest.raises(ValueError, match="outside its CI"):
        Cell(value, low, high, source="reports/metrics/x.json")


def test_html_carries_the_numbers_and_the_source():
    c = Cell(0.25, 0.2, 0.3, scale=100, digits=1, source="bootstrap over seeds")
    v = cell_view(c, "mAP")
    assert v["text"] == "25.0 [20.0, 30.0]" and "num" in v["classes"]
    assert v["data"] == {"value": "25", "ci-low": "20", "ci-high": "30"}
    html = render_html([Section("t", "T", tables=[Table("x", ["row", "mAP"], [["a", c]])])])
    assert 'data-value="25" data-ci-low="20" data-ci-high="30" title="bootstrap over seeds"' in html
