"""One multi-label data set's table from a folder of ``train_multilabel.py`` outputs, with the
report's statistics; not a DVC stage: for runs made outside the pipeline (a preset's data set
at its declared defaults, say).

    python scripts/multilabel_table.py --metrics-dir DIR [DIR ...] --dataset bibtex [--json OUT]

``--frequent-k K`` (default 10): the mAP over labels with at least K test positives, as the
report's "mAP (frequent labels)" column. ``--coverage FILE`` (a ``bench/bench_coverage.py``
output holding the set) applies the report's coverage rule instead: K is the smallest whose
simulated interval covers, and an mAP column whose interval misses the target at the set's
shape is given without one (°).

Reads ``DIR/<dataset>_<variant>.json`` and ``DIR/reps/<dataset>_<variant>.npz`` (what
``stages/train_multilabel.py --metrics-dir DIR`` writes); with several folders, a row comes
from the first folder that has it (``--metrics-dir tuned default``: the tuned rows, and the
declared-values run of each row not tuned; all runs of one data set share its test rows and
bootstrap draws, so the rows stay paired), and prints, per row, mAP, macro-F1 at
the validation threshold, micro-F1 and macro-F1 at 0.5: mean over seeds with the 95 % CI of the
stratified bootstrap (none where it excludes its estimate, as in the report), and the difference to the strongest baseline (highest validation mAP)
with its Holm-corrected paired p (:func:`contrastlab.reporting.multilabel_stats.table_stats`,
the report's own function). ``--json`` writes the same numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from contrastlab.cli import ArgParser, run_stage
from contrastlab.errors import InputError

KEYS = (("map", "mAP"), ("map_frequent", "mAP (labels with >= k test positives)"),
        ("macro_f1_val_t", "macro-F1 (val. threshold)"), ("micro_f1", "micro-F1"),
        ("macro_f1", "macro-F1 (0.5)"))


def table(metrics_dir: Path | list[Path], dataset: str, frequent_k: int = 10,
          coverage: Path | None = None) -> dict:
    """``{"baseline": name, "frequent_k": k, "rows": {variant: {metric: {mean, ci_low, ci_high,
    no_ci, delta, p_holm, n_resamples, family_size, above, below}}}, "n_seeds": {variant: S},
    "source": {variant: folder}}`` (``p_holm``: the Holm-corrected bootstrap tail p, never below
    its floor ``2 family_size / (n_resamples + 1)``);
    ``ci_low`` / ``ci_high`` are ``None`` and ``no_ci`` true where the bias-corrected interval
    excludes its estimate, ``no_cover`` true where ``coverage`` (a bench_coverage.py output)
    finds the column's interval below the coverage target at the set's shape (then ``frequent_k``
    is the set's covering k from that file, None when no k covers). ``metrics_dir``: one folder
    or several, a row taken from the first folder that has it with its replicates.

    Raises:
        InputError: fewer than two rows of ``dataset`` with replicates in the folders.
    """
    from contrastlab.reporting.multilabel_rows import ROWS
    from contrastlab.reporting.multilabel_stats import (_frequent_k, copy_frequent, excludes_estimate,
                                                        load_metrics, load_reps, table_stats,
                                                        uncovered_map_keys)

    dirs = [Path(metrics_dir)] if isinstance(metrics_dir, (str, Path)) else [Path(d) for d in metrics_dir]
    runs: dict[str, dict] = {}
    reps: dict[str, dict] = {}
    source: dict[str, str] = {}
    for d in dirs:
        found = load_metrics(d).get(dataset, {})
        got = load_reps(d / "reps", dataset, [v for v in found if v not in reps])
        for v, r in got.items():
            runs[v], reps[v], source[v] = found[v], r, str(d)
    k = _frequent_k(Path(coverage), dataset, runs, reps) if coverage is not None else None
    if coverage is not None and k is None:
        raise InputError(f"{coverage}: no coverage simulated for {dataset!r}")
    uncovered = uncovered_map_keys(k)
    if coverage is not None:  # an F1 column whose simulated coverage misses [0.92, 0.98]: no interval
        from contrastlab.reporting import coverage_rule as rule

        cov = {dataset: json.loads(Path(coverage).read_text()).get(dataset) or {}}
        uncovered = {*uncovered, *(key for key, _ in KEYS if "f1" in key
                                   and not rule.covers(cov, f"{dataset}.{key}"))}
    if k is None:
        copy_frequent(runs, reps, frequent_k)  # the report's "mAP (frequent labels)" column
    else:
        frequent_k = k if k > 0 else None
    st = table_stats(runs, reps)
    if not st:
        raise InputError(f"{', '.join(map(str, dirs))}: fewer than two rows of {dataset!r} with replicates")
    base = st["_baseline"]
    out = {"baseline": base, "frequent_k": frequent_k, "rows": {}, "n_seeds": {}, "source": {}}
    for v in [r for r in ROWS.table1 if r in runs and r in reps]:
        out["n_seeds"][v] = int(runs[v].get("n_seeds", 0))
        out["source"][v] = source[v]
        cells = {}
        for key, _ in KEYS:
            e = st.get(key, {}).get(v)
            if e is None:
                continue
            no_cover = key in uncovered  # the report's rule (°): below the coverage target
            no_ci = no_cover or excludes_estimate(e)  # (§): the interval excludes its estimate
            lo, hi = (None, None) if no_ci else (e.get("ci_low"), e.get("ci_high"))
            cells[key] = {"mean": e["mean"], "ci_low": lo, "ci_high": hi, "no_ci": no_ci, "no_cover": no_cover,
                          "delta": e.get("delta_vs_baseline"), "p_holm": e.get("p_vs_baseline_holm"),
                          "n_resamples": e.get("n_resamples"), "family_size": e.get("family_size", 1),
                          "above": bool(e.get("beats_baseline")), "below": bool(e.get("below_baseline"))}
        out["rows"][v] = cells
    return out


def markdown(t: dict, dataset: str) -> str:
    from contrastlab.evaluation.stats import format_p
    from contrastlab.reporting.multilabel_rows import short

    k = t["frequent_k"]
    labels = [(key, lab.replace("k", str(k), 1) if "k test" in lab and k is not None else
               "mAP (frequent labels: no k covers)" if "k test" in lab else lab) for key, lab in KEYS]
    head = "| row | seeds | " + " | ".join(f"{lab} [CI]; Δ vs {short(t['baseline'])} (Holm p)"
                                          for _, lab in labels) + " |"
    lines = [f"{dataset}: strongest baseline on validation mAP: {short(t['baseline'])}. Cells: mean "
             "over seeds [95 % CI]; Δ in points, Holm-corrected paired p; ▲/▼ significantly "
             "above/below. §: the bias-corrected interval excludes its own estimate (rare labels: "
             "resampling rows moves AP more than the draws spread), not shown. °: the interval's "
             "simulated coverage at this set's shape is outside [0.92, 0.98] (F1: at the operating "
             "point the pipeline picks) or was not simulated, not shown.", "", head,
             "|" + "---|" * (2 + len(KEYS))]
    for v, cells in t["rows"].items():
        parts = []
        for key, _ in KEYS:
            c = cells.get(key)
            if c is None:
                parts.append("-")
                continue
            mark = " ▲" if c["above"] else " ▼" if c["below"] else ""
            ci = (" °" if c.get("no_cover") else " §" if c["no_ci"] else
                  f" [{100 * c['ci_low']:.1f}, {100 * c['ci_high']:.1f}]" if c["ci_low"] is not None else "")
            d = ("" if c["delta"] is None or v == t["baseline"] else
                 f"; {100 * c['delta']:+.1f} "
                 f"({format_p(c['p_holm'], c.get('n_resamples'), c.get('family_size', 1))}){mark}")
            parts.append(f"{100 * c['mean']:.2f}{ci}{d}")
        lines.append(f"| {short(v)} | {t['n_seeds'][v]} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics-dir", type=Path, nargs="+", required=True,
                    help="folder(s) of train_multilabel outputs; a row from the first that has it")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--frequent-k", type=int, default=10,
                    help="mAP over labels with at least k test positives (the report takes k from "
                         "the coverage simulation of the set; 10 when it has none)")
    ap.add_argument("--coverage", type=Path, default=None,
                    help="bench/bench_coverage.py output holding the set: k and the ° rule from it")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    t = table(args.metrics_dir, args.dataset, args.frequent_k, args.coverage)
    print(markdown(t, args.dataset))
    if args.json:
        from contrastlab.io import write_json

        write_json(args.json, t)
    return 0


if __name__ == "__main__":
    run_stage(main)
