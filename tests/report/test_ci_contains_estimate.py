"""Every interval the pipeline writes contains its point estimate.

Reads every JSON file under ``reports/`` and the Markdown report, finds each (estimate,
interval) pair, and fails on the first interval that misses its estimate. Pairs are found
by three conventions the pipeline writes:

- JSON: sibling keys ``<m>_mean`` / ``<m>_ci_low`` / ``<m>_ci_high`` or ``mean`` /
  ``ci_low`` / ``ci_high`` (any depth);
- Markdown cells ``estimate [low, high]`` (optionally followed by ``%`` or a mark);
- Markdown tables whose column ``95% CI`` holds ``low-high`` next to the estimate's column.

Estimates in the Markdown are rounded, so the check allows half a unit of the last printed
digit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
NUM = r"[-+]?\d+(?:\.\d+)?"


def _pairs_json(obj, where: str):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k.endswith("_ci_low") or k == "ci_low":
                stem = k[: -len("ci_low")]
                hi, mean = obj.get(stem + "ci_high"), obj.get(stem + "mean")
                if isinstance(mean, (int, float)) and isinstance(v, (int, float)) and \
                        isinstance(hi, (int, float)):
                    yield f"{where}.{stem}mean", float(mean), float(v), float(hi), 1e-9
            yield from _pairs_json(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _pairs_json(v, f"{where}[{i}]")


def _tol(*texts: str) -> float:
    digits = min((len(t.split(".")[1]) if "." in t else 0) for t in texts)  # the coarsest
    return 0.5 * 10 ** (-digits) + 1e-9


def _pairs_markdown(text: str, where: str):
    for m in re.finditer(rf"({NUM})\s*\[({NUM}),\s*({NUM})\]", text):
        e, lo, hi = m.groups()
        yield f"{where}: {m.group(0)}", float(e), float(lo), float(hi), _tol(e, lo, hi)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|") or "95% CI" not in line:
            continue
        head = [c.strip() for c in line.strip().strip("|").split("|")]
        ci_cols = [j for j, c in enumerate(head) if c.startswith("95% CI")]
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            cells = [c.strip().strip("*_ ") for c in row.strip().strip("|").split("|")]
            for j in ci_cols:
                if j == 0 or j >= len(cells):
                    continue
                m = re.fullmatch(rf"({NUM})\s*[-–]\s*({NUM})", cells[j])
                e = re.match(rf"({NUM})", cells[j - 1])
                if m and e:
                    yield (f"{where}: {row[:60]}", float(e.group(1)), float(m.group(1)),
                           float(m.group(2)), _tol(e.group(1), *m.groups()))


def _all_pairs():
    out = []
    for p in sorted(REPORTS.rglob("*.json")):
        try:
            obj = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        out += list(_pairs_json(obj, str(p.relative_to(ROOT))))
    for p in sorted(REPORTS.rglob("*.md")):
        out += list(_pairs_markdown(p.read_text(), str(p.relative_to(ROOT))))
    return out


def test_the_checker_finds_a_miss():
    md = "| row | acc | 95% CI |\n|---|---|---|\n| a | 0.812 | 0.791-0.834 |\n| b | 0.50 | 0.52-0.60 |\n"
    bad = [w for w, e, lo, hi, t in _pairs_markdown(md + "x 37.84 [39.3, 47.5] %", "t")
           if not (lo - t <= e <= hi + t)]
    assert len(bad) == 2
    js = {"a": {"acc_mean": 0.5, "acc_ci_low": 0.51, "acc_ci_high": 0.6}}
    assert [w for w, e, lo, hi, t in _pairs_json(js, "j") if not lo - t <= e <= hi + t]


def test_every_written_interval_contains_its_estimate():
    pairs = _all_pairs()
    if not pairs:
        pytest.skip("no report outputs in this checkout")
    bad = [f"{w}: {e} not in [{lo}, {hi}]" for w, e, lo, hi, t in pairs
           if not (lo - t <= e <= hi + t)]
    assert not bad, f"{len(bad)} of {len(pairs)} intervals miss their estimate:\n" + "\n".join(bad[:20])
