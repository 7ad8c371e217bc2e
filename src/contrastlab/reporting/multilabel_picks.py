"""The multi-label track's validation picks and their margins (the report's table).

Every final run records, per seed, each choice it made on validation (the F1 threshold, the
early-stopping step, the logistic-regression C) with its margin: the validation rows that
decide it (:mod:`contrastlab.evaluation.picks`). The table gives, per data set and pick, the
runs, the median and smallest margin, and the runs whose pick is fragile (decided by under
1 % of the validation rows).
"""

from __future__ import annotations

import numpy as np

from . import Table

__all__ = ["PICK_TITLES", "picks_table", "missing_picks"]

#: The picks a run can record, in the table's order, with their names in the report.
PICK_TITLES = {"threshold": "F1 threshold", "early_stopping": "early-stopping step",
               "early_stopping_pretrain": "early-stopping step (pre-training)",
               "C": "logistic-regression C"}


def missing_picks(run: dict) -> list[str]:
    """The picks a final run's metrics made but did not record a margin for: the threshold
    (every run reports F1 at a validation threshold), early stopping (a run with a
    ``best_step``) and C (a run that chose ``C``)."""
    picks = run.get("picks") or {}
    need = ["threshold"] + (["early_stopping"] if "best_step" in run else []) + (["C"] if "C" in run else [])
    return [k for k in need if "margin_seed" not in picks.get(k, {})]


def picks_table(runs: dict[str, dict[str, dict]]) -> Table | None:
    """One row per (data set, pick) over every variant's final run that records it: runs
    (variant x seed), validation rows, median and smallest margin (rows, and % of the
    validation rows), fragile runs. ``runs``: ``{dataset: {variant: metrics dict}}``."""
    rows = []
    for ds, by_variant in runs.items():
        for key, title in PICK_TITLES.items():
            recs = [r["picks"][key] for r in by_variant.values() if key in (r.get("picks") or {})]
            if not recs:
                continue
            margins = np.concatenate([rec["margin_seed"] for rec in recs])
            n_val = recs[0]["n_val"]
            fragile = sum(rec["fragile_seeds"] for rec in recs)
            rows.append([ds, title, str(len(margins)), str(n_val),
                         f"{np.median(margins):.0f} ({100 * np.median(margins) / n_val:.1f} %)",
                         f"{margins.min():.0f} ({100 * margins.min() / n_val:.1f} %)",
                         f"{fragile} ({100 * fragile / len(margins):.0f} %)"])
    if not rows:
        return None
    return Table("Validation picks and their margins",
                 ["Data set", "Pick", "Runs", "Validation rows", "Median margin", "Smallest margin",
                  "Fragile runs"], rows,
                 note="A run is one variant and seed. The margin of a pick is the number of "
                      "validation rows that decide it: the fewest rows whose removal lets another "
                      "candidate reach the pick's criterion (exact for a count; for mAP and F1 "
                      "from each row's jackknife pseudo-value). Fragile: a margin under 1 % of "
                      "the validation rows (on a validation split under 100 rows only a tie is "
                      "fragile: read the margin itself). The threshold maximises validation "
                      "(micro-F1 + macro-F1) / 2 averaged with its two grid neighbours; early "
                      "stopping and C maximise validation mAP.")
