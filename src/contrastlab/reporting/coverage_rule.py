"""The report's coverage rule (°): a 95 % interval is printed only where the coverage
simulation (``bench/bench_coverage.py`` -> ``reports/metrics/coverage.json``) found it
covering in [0.92, 0.98] at that column's operating point (:func:`coverage_key`); elsewhere
the estimate alone, marked ° (docs/statistics.md, "Coverage").
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ..io import read_json
from . import Cell
from .finetune import HEADS, TIER_HEADS
from .multilabel_rows import METRICS

LO, HI = 0.92, 0.98
MARK = "°"
NOTE = ("°: no interval shown: the coverage simulation at this column's operating point "
        "(its data set's shape, bench/bench_coverage.py) finds the bootstrap interval's coverage "
        "outside [0.92, 0.98], or did not simulate it (reports/metrics/coverage.json, "
        "docs/statistics.md).")


def load(metrics_dir: Path) -> dict:
    """``<metrics_dir>/coverage.json`` (``{}`` when absent), with each preset folder's sets as
    ``"multilabel_<preset>/<set>"``."""
    cov = read_json(Path(metrics_dir) / "coverage.json", optional=True) or {}
    for p in sorted(Path(metrics_dir).glob("multilabel_*/coverage.json")):
        cov.update({f"{p.parent.name}/{ds}": e for ds, e in read_json(p).items()
                    if not ds.startswith("_")})
    return cov


def covers(cov: dict, key: str | None) -> bool:
    """The simulated coverage of ``key`` (``"<group>.<metric>"``) lies in [LO, HI]."""
    if key is None:
        return False
    group, _, metric = key.partition(".")
    entry = cov.get(group) or {}
    if metric == "map_frequent":  # the set's one map_min<k>pos: its smallest covering k
        metric = next((m for m in entry if m.startswith("map_min")), "")
    c = entry.get(metric)
    return isinstance(c, (int, float)) and LO <= c <= HI


def strip(cell, ok: bool):
    """``cell`` (a :class:`~contrastlab.reporting.Cell`) without its interval and marked ° unless
    ``ok`` (a cell that never had an interval is marked too: its column does not cover)."""
    return cell if ok else dataclasses.replace(cell, low=None, high=None, marks=(*cell.marks, MARK))


#: fine-tuning column header -> metric (split prefixed), from the fine-tuning tables' own headers
_FT = {h: c for d in (HEADS, TIER_HEADS) for c, h in d.items()}
#: multi-label column header -> metric of the set's coverage.json entry, from the multi-label
#: tables' own headers ("default", "tuned": the default-vs-tuned table's mAP columns)
_ML = {h: m for m, h in METRICS if m != "map_frequent"} | {"default": "map", "tuned": "map"}
_CODE = {"R@1 % [CI]": "rank_at_1", "R@5 % [CI]": "rank_at_5", "R@10 % [CI]": "rank_at_10", "MRR [CI]": "mrr",
         "default test R@10 % [CI]": "rank_at_10", "tuned test R@10 % [CI]": "rank_at_10"}


def coverage_key(section: str, title: str, column: str, row: list) -> str | None:
    """The coverage.json key of an interval column (``row``: for tables with a data-set
    column); None when the column was never simulated."""
    if section == "multilabel":
        m = re.match(r"(\S+), preset multilabel-(\S+) \(", title)  # reporting/multilabel_presets.py
        if m:  # simulated in the preset's own folder (no file: its intervals are not printed)
            return f"multilabel_{m.group(2).replace('-', '_')}/{m.group(1)}.{_ML[column]}" if column in _ML else None
        m = re.match(r"(\S+): Table 1 format", title)
        ds = m.group(1) if m else str(row[1]) if title.startswith("Default (params.yaml") else None
        if column == "mAP (frequent labels)":
            return f"{ds}.map_frequent" if ds else None
        m2 = re.match(r"(\S+) (micro|macro)-F1$", column)  # the Table 4 ablation: F1 @val-t per set
        if title.startswith("Ablation") and m2:
            return f"{m2.group(1)}.{m2.group(2)}_f1_val_t"
        return f"{ds}.{_ML[column]}" if ds and column in _ML else None
    if section == "finetune":  # the GPU table's rows were not simulated
        m = None if title.startswith("GPU") else re.search(r"split \(?([ab])\)?", title, re.I)
        return f"finetune.{m.group(1)}_{_FT[column]}" if m and column in _FT else None
    if section == "code":
        # only the main table's shape (params.yaml's code section) was simulated
        main = title.startswith("Signature -> body retrieval, default corpus") or title.startswith("Default vs tuned")
        return f"code.{_CODE[column]}" if main and column in _CODE else None
    if section == "graph":
        return "graph.accuracy"
    return None


def apply(table, section: str, cov: dict):
    """Strip (°) every :class:`~contrastlab.reporting.Cell` interval of ``table`` whose column's
    coverage (:func:`coverage_key`) misses [LO, HI]; the caption gets :data:`NOTE`."""
    hit = False
    for r in table.rows:
        for j, c in enumerate(r):
            if isinstance(c, Cell) and c.low is not None and j < len(table.columns) and not covers(
                    cov, coverage_key(section, table.title, table.columns[j], r)):
                r[j], hit = strip(c, False), True
    if hit and NOTE not in table.note:
        table.note = (table.note + " " + NOTE).strip()
    return table
