"""Validation picks and their margins (a report table per track).

Every final run records, per seed, each choice it made on validation (multi-label: the F1
threshold, the early-stopping step, the logistic-regression C; code retrieval: the
early-stopping epoch; fine-tuning: the early-stopping step) with its margin: the validation
items that decide it (:mod:`contrastlab.evaluation.picks`). The table gives, per data set
and pick, the runs, the median and smallest margin, and the runs whose pick is fragile
(decided by under 1 % of the validation items).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..io import read_json
from . import Table

__all__ = ["PICK_TITLES", "MULTILABEL_NOTE", "picks_table", "missing_picks", "runs_in",
           "unrecorded_note"]

#: The picks a run can record, in the table's order, with their names in the report.
PICK_TITLES = {"threshold": "F1 threshold", "early_stopping": "early-stopping step",
               "early_stopping_pretrain": "early-stopping step (pre-training)",
               "C": "logistic-regression C"}


def _records_picks(obj) -> bool:
    """Some mapping in ``obj`` (a parsed JSON) holds a ``picks`` record or a ``margin*`` value."""
    if isinstance(obj, dict):
        return (any(k == "picks" or k.startswith("margin") for k in obj)
                or any(_records_picks(v) for v in obj.values()))
    return isinstance(obj, list) and any(_records_picks(v) for v in obj)


def unrecorded_note(metrics: Path, folder: str) -> str:
    """A sentence for the note of a table built from ``<metrics>/<folder>`` when none of its
    ``*.json`` (at any depth) records a validation pick's margin: the runs predate the record
    (a preset run before it existed); ``""`` when some run records one."""
    if any(_records_picks(read_json(f)) for f in sorted((Path(metrics) / folder).rglob("*.json"))):
        return ""
    return (f" Margins: the runs in reports/metrics/{folder}/ predate the record of validation "
            "picks, so their picks (early stopping, thresholds, C, fusion weights) carry no "
            "margin; a rerun of the preset records them.")


def runs_in(folder: Path) -> dict[str, dict]:
    """``{stem: metrics}`` of every ``*.json`` in ``folder`` (sorted; none when it is absent):
    the runs of one group of a picks table."""
    return {f.stem: read_json(f) for f in sorted(Path(folder).glob("*.json"))}


def missing_picks(run: dict) -> list[str]:
    """The picks a final run's metrics made but did not record a margin for: the threshold
    (every run reports F1 at a validation threshold), early stopping (a run with a
    ``best_step``) and C (a run that chose ``C``)."""
    picks = run.get("picks") or {}
    need = ["threshold"] + (["early_stopping"] if "best_step" in run else []) + (["C"] if "C" in run else [])
    return [k for k in need if "margin_seed" not in picks.get(k, {})]


#: The multi-label table's note (the rules of its picks).
MULTILABEL_NOTE = ("The threshold maximises validation (micro-F1 + macro-F1) / 2 averaged with its "
                   "two grid neighbours; early stopping and C maximise validation mAP.")


def picks_table(runs: dict[str, dict[str, dict]], note: str = MULTILABEL_NOTE,
                titles: dict[str, str] = PICK_TITLES, items: str = "rows",
                group: str = "Data set") -> Table | None:
    """One row per (data set, pick) over every variant's final run that records it: runs
    (variant x seed), validation items, median and smallest margin (items, and % of the
    validation items), fragile runs. ``runs``: ``{dataset: {variant: metrics dict}}`` (a
    metrics dict's ``picks``: ``{pick: evaluation.picks.seed_summary}``); ``titles``: the
    picks shown and their names; ``items``: what the validation items are ("rows",
    "queries"); ``note``: the track's rules, after the common definition; ``group``: the
    first column's header (what the keys of ``runs`` are)."""
    rows = []
    for ds, by_variant in runs.items():
        for key, title in titles.items():
            recs = [r["picks"][key] for r in by_variant.values() if key in (r.get("picks") or {})]
            if not recs:
                continue
            margins = np.concatenate([rec["margin_seed"] for rec in recs])
            n_val, fragile = recs[0]["n_val"], sum(rec["fragile_seeds"] for rec in recs)
            rows.append([ds, title, str(len(margins)), str(n_val),
                         *(f"{m:g} ({100 * m / n_val:.1f} %)"
                           for m in (np.median(margins), margins.min())),
                         f"{fragile} ({100 * fragile / len(margins):.0f} %)"])
    if not rows:
        return None
    return Table("Validation picks and their margins",
                 [group, "Pick", "Runs", f"Validation {items}", "Median margin",
                  "Smallest margin", "Fragile runs"], rows,
                 note=f"A run is one variant and seed. The margin of a pick is the number of "
                      f"validation {items} that decide it: the fewest {items} whose removal lets "
                      f"another candidate reach the pick's criterion (exact for a count; for mAP "
                      f"and F1 from each one's jackknife pseudo-value). Fragile: a margin under "
                      f"1 % of the validation {items} (on a validation split under 100 {items} "
                      f"only a tie is fragile: read the margin itself). " + note)
