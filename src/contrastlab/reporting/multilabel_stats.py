"""Statistics and tables of the multi-label section (:mod:`contrastlab.reporting.multilabel`):
the metrics and bootstrap replicates read back, the per-data-set summaries, the cells, the
Friedman / Nemenyi family of one metric and the default-vs-tuned table.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from ..evaluation.stats import (bias_corrected_interval, format_p, friedman_nemenyi, holm,
                                paired_pvalue, plot_cd, summarize)
from ..io import read_json
from . import Cell, Figure, Table
from . import coverage_rule as rule
from .multilabel_rows import _TABLE, ALIASES, ALPHA, BASELINES, METRICS, ROWS, Rows

def load_metrics(metrics_dir: Path, rows: Rows = ROWS) -> dict[str, dict[str, dict]]:
    """``{dataset: {variant: metrics}}`` from ``<dataset>_<variant>.json`` files (a file whose
    name does not end in a known variant of ``rows`` is skipped)."""
    out: dict[str, dict[str, dict]] = {}
    names = sorted(rows.titles, key=len, reverse=True)  # a longer name first: its suffix may be a name
    for f in sorted(Path(metrics_dir).glob("*.json")):
        for v in names:
            if f.stem.endswith("_" + v):
                out.setdefault(f.stem[: -len(v) - 1], {})[v] = read_json(f)
                break
    return out


def load_reps(reps_dir: Path, dataset: str, variants: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """``{variant: {metric: [R]}}`` bootstrap replicates (variants without a file left out)."""
    out = {}
    for v in variants:
        f = Path(reps_dir) / f"{dataset}_{v}.npz"
        if f.exists():
            with np.load(f) as z:
                out[v] = {k: z[k].astype(np.float64) for k in z.files}
    return out


def table_stats(runs: dict[str, dict], reps: dict[str, dict[str, np.ndarray]], rows: Rows = ROWS) -> dict[str, dict]:
    """Per metric: :func:`contrastlab.evaluation.stats.summarize` over the variants that have
    replicates; candidates = every row (losses, hybrids and baselines); baseline = the strongest
    baseline: the baseline row with the highest validation mAP (``val_map``, mean over seeds of the
    kept models' validation mAP), None when no baseline has run. ``out["_baseline"]`` names it."""
    names = [v for v in rows.table1 if v in runs and v in reps]
    if len(names) < 2:
        return {}
    have = [v for v in BASELINES if v in names and "val_map" in runs[v]]
    base = max(have, key=lambda v: runs[v]["val_map"]) if have else None
    out: dict = {"_baseline": base}
    for key, _ in METRICS:
        if all(key in reps[v] for v in names):
            out[key] = summarize({v: runs[v][key] for v in names}, {v: reps[v][key] for v in names},
                                 alpha=ALPHA, baseline=base, candidates=names)
    return out


def _frequent_k(coverage_json: Path, ds: str, runs: dict[str, dict], reps: dict[str, dict]) -> int | None:
    """The data set's ``k`` of "mAP (frequent labels)": the ``map_min<k>pos`` entry of
    ``reports/metrics/coverage.json`` (the smallest ``k`` whose interval covers in the
    simulation at this set's shape, bench/bench_coverage.py). Copies ``map_min<k>`` of the
    metrics and replicates to the ``map_frequent`` column. Returns ``k``; -1 when the
    simulation ran for this set and found no such ``k``; None when it did not run."""
    cov = (read_json(coverage_json, optional=True) or {}).get(ds)
    if cov is None:
        return None
    keys = [m for m in cov if m.startswith("map_min")]
    if not keys:
        return -1
    k = int(keys[0][len("map_min"):-len("pos")])
    copy_frequent(runs, reps, k)
    return k


def copy_frequent(runs: dict[str, dict], reps: dict[str, dict], k: int) -> None:
    """Copy ``map_min<k>`` of each row's metrics and replicates (in place) to its
    ``map_frequent`` column: the mAP over labels with at least ``k`` test positives."""
    for v, m in runs.items():
        if f"map_min{k}" in m:
            m["map_frequent"] = m[f"map_min{k}"]
            if v in reps and f"map_min{k}" in reps[v]:
                reps[v]["map_frequent"] = reps[v][f"map_min{k}"]


def excludes_estimate(st: dict) -> bool:
    """The bias-corrected interval of a :func:`summarize` entry lies on one side of its own
    estimate (rare labels: :data:`NO_CI_NOTE`); such an interval is never shown or written."""
    lo, hi = st.get("ci_low"), st.get("ci_high")
    return lo is not None and hi is not None and not lo - 1e-12 <= st["mean"] <= hi + 1e-12


def _frequent_note(runs: dict[str, dict], dataset_json: Path, k: int | None) -> str:
    """Caption text for the ``map_frequent`` column: its ``k``, how many labels it averages
    and how many rarer ones it leaves out; or why there is none."""
    if k == -1:
        return ("mAP: no interval of mAP, over all labels or over the labels with at least 5-40 "
                "test positives, reaches the 0.92 coverage target in the simulation at this set's "
                "shape (reports/metrics/coverage.json): its estimates are shown without intervals (°). ")
    nf = next((m[f"map_min{k}_labels"] for m in runs.values() if f"map_min{k}_labels" in m), None)
    if k is None or nf is None:
        return ""
    ds_info = read_json(dataset_json, optional=True)
    n_lab = ds_info["test"]["labels"] if ds_info is not None else None
    left = f"; the other {n_lab - int(nf)} label(s) left out" if n_lab is not None else ""
    return (f"mAP (frequent labels): mean AP over the {int(nf)} labels with at least {k} test "
            f"positives{left}. The AP of a label with fewer positives is biased upwards and the "
            "interval of mAP over all labels does not reach the 0.92 coverage target at this set's "
            f"shape (its estimates are shown without intervals, °), this one does (k = {k}: the "
            "smallest that does; reports/metrics/coverage.json, docs/statistics.md). ")


def _cell(st: dict | None, m: dict, key: str, uncovered: bool = False) -> Cell:
    """A metric of one row: mean [95 % CI] in % (bold = in the MCS; ↑/↓ vs the strongest
    baseline); without replicates the mean alone. ``uncovered``: the metric's interval misses
    the coverage target at this set's shape (:data:`NO_COVER_NOTE`): no interval is shown."""
    if key not in m:
        return Cell(None)
    src = f"{key}: mean over seeds, stratified bootstrap CI"
    if st is None:
        return Cell(m[key], scale=100, digits=2, source=src)
    # no interval where it misses the coverage target (NO_COVER_NOTE), or where the
    # bias-corrected interval moved past its own estimate: the resampling bias of AP over rare
    # labels exceeds the spread of the draws (NO_CI_NOTE)
    mark = NO_COVER_MARK if uncovered else NO_CI_MARK if excludes_estimate(st) else None
    c = Cell.from_stats(st if mark is None else {**st, "ci_low": None, "ci_high": None},
                        scale=100, digits=2, ci_digits=1, source=src)
    return c if mark is None else dataclasses.replace(c, marks=(*c.marks, mark))


#: Mark of a cell whose bias-corrected bootstrap interval excludes its own estimate.
NO_CI_MARK = "§"
NO_CI_NOTE = ("§: no interval shown: the bias-corrected bootstrap interval (Efron & Tibshirani "
              "1993, Sec. 14.3) lies entirely on one side of the estimate, because resampling "
              "rows duplicates the few positives of rare labels and moves AP by more than the "
              "spread of the draws (the coverage simulation at this set's shape is in "
              "reports/metrics/coverage.json).")


#: Mark of a cell whose interval misses the coverage target at its operating point (coverage_rule).
NO_COVER_MARK, NO_COVER_NOTE = rule.MARK, rule.NOTE


def uncovered_keys(cov: dict, ds: str) -> set[str]:
    """The columns of :data:`METRICS` whose interval is not shown at ``ds``: those without a
    simulated coverage in [0.92, 0.98] at the set's operating point in ``cov``
    (reports/metrics/coverage.json; :mod:`.coverage_rule`)."""
    return {key for key, head in METRICS
            if not rule.covers(cov, rule.coverage_key("multilabel", f"{ds}: Table 1 format", head, []))}


def uncovered_map_keys(k: int | None) -> set[str]:
    """The mAP columns whose intervals are not shown, given a set's ``k`` from
    :func:`_frequent_k`: none when the plain mAP covers (``k = 1``) or the coverage was not
    simulated (None); the plain mAP when a ``k >= 5`` does; both when no ``k`` does (-1)."""
    return set() if k is None or k == 1 else {"map"} if k > 1 else {"map", "map_frequent"}


def dataset_stats(ddir: Path, datasets: list[str]) -> list[list]:
    return [[ds, m["train"]["n"], m.get("val", {}).get("n", "-"), m["test"]["n"],
             m.get("train_full", "-"), m.get("n_features", "-"), m.get("n_labels", "-"),
             f"{m['train']['cardinality']:.2f}",
             ", ".join(m.get("dropped_attributes") or []) or "none"]
            for ds in datasets
            if (m := read_json(Path(ddir) / f"{ds}_dataset.json", optional=True)) is not None]


def friedman_family(runs: dict[str, dict[str, dict]], methods: list[str], datasets: list[str], key: str,
                    label: str, figures_dir: Path, rows: Rows = ROWS) -> tuple[dict | None, list, list]:
    """Friedman test + Nemenyi critical difference (Demsar 2006) of ``key`` over ``methods``
    (distinct methods: no alias of :data:`ALIASES` among them) on ``datasets``: its own family,
    one test per metric. Returns ``(result or None, [Figure], [Table])``."""
    methods = [v for v in methods if v not in ALIASES]
    if len(datasets) < 2 or len(methods) < 3:
        return None, [], []
    df = pd.DataFrame({v: [runs[ds][v][key] for ds in datasets] for v in methods}, index=datasets)
    fr = friedman_nemenyi(df, higher_is_better=True, alpha=ALPHA)
    cdp = Path(figures_dir) / f"multilabel_cd_{key}.png"
    plot_cd({**fr, "avg_ranks": {rows.short(k): v for k, v in fr["avg_ranks"].items()}}, cdp,
            title=f"{label}, {fr['n_datasets']} data sets")
    alias_note = "; ".join(f"{rows.titles[t]}: {_TABLE[a].short} is declared its alias (variants.yaml alias_of) "
                           "and trained and ranked once" for a, t in ALIASES.items() if t in methods)
    fig = Figure(f"Critical-difference diagram ({label})", cdp,
                 f"Average {label} ranks of {fr['n_methods']} distinct methods over {fr['n_datasets']} data "
                 f"sets (1 = best; hybrids left out{'; ' + alias_note if alias_note else ''}); methods joined by a "
                 f"bar are within the Nemenyi critical difference {fr['cd']:.2f} (alpha {ALPHA}). "
                 f"Friedman chi2 = {fr['friedman_stat']:.2f}, p = {fr['friedman_p']:.3g}.")
    order = sorted(fr["avg_ranks"], key=fr["avg_ranks"].get)
    tab = Table(f"Average {label} rank across data sets (Friedman / Nemenyi)",
                ["Method", "average rank"] + datasets,
                [[rows.titles[v], f"{fr['avg_ranks'][v]:.2f}"] + [f"{100 * runs[ds][v][key]:.2f}" for ds in datasets]
                 for v in order],
                note=f"Friedman chi2 = {fr['friedman_stat']:.2f}, p = {fr['friedman_p']:.3g}; "
                     f"Nemenyi CD = {fr['cd']:.2f} at alpha {ALPHA} (Demsar 2006); {fr['n_methods']} distinct "
                     f"methods, a family of its own (one test per metric); the exploratory hybrids left out.")
    return fr, [fig], [tab]


def trial0_values(history_csv: Path) -> dict[str, tuple[float, float]]:
    """Per data set, the objective of trial 0 (the declared configuration) and its standard
    error over folds, from a study history ``reports/plots/tune/multilabel/<variant>.csv``
    (columns ``dataset``, ``trial``, ``value``, ``se``); empty when the file is missing."""
    if not Path(history_csv).exists():
        return {}
    h = pd.read_csv(history_csv)
    if not {"dataset", "trial", "value"} <= set(h.columns):
        return {}
    h = h[(h["trial"] == 0) & h["value"].notna()]
    se = h["se"] if "se" in h else pd.Series(float("nan"), index=h.index)
    return {str(d): (float(v), float(e)) for d, v, e in zip(h["dataset"], h["value"], se)}


def _dvt_pairs(mdir: Path, tdir: Path, v: str, rowset: Rows, cov: dict | None) -> list[tuple]:
    """Per tuned set of ``v``: ``(row, tuned - default reps, tuned - default, trial 0 won)``."""
    out, tuned = [], read_json(tdir / f"{v}.json", optional=True) or {}
    for ds, e in sorted((tuned.get("datasets") or {}).items()):
        dd = mdir / "default" / ds
        files = [dd / f"{ds}_{v}.json", mdir / f"{ds}_{v}.json",
                 dd / "reps" / f"{ds}_{v}.npz", mdir / "reps" / f"{ds}_{v}.npz"]
        if not all(x.exists() for x in files):
            continue
        (d, t), (dr, tr) = ([read_json(x)["map"] for x in files[:2]],
                            [np.load(x)["map"].astype(np.float64) for x in files[2:]])
        cells = []
        ok = cov is None or rule.covers(cov, rule.coverage_key("multilabel", "Default (params.yaml",
                                                                 "default", [None, ds]))
        for point, reps in ((d, dr), (t, tr)):
            lo, hi = bias_corrected_interval(point, reps)
            shown = ok and not excludes_estimate({"mean": point, "ci_low": lo, "ci_high": hi})
            cells.append(f"{100 * point:.2f} " + (f"[{100 * lo:.1f}, {100 * hi:.1f}]" if shown else
                                                  NO_CI_MARK if ok else NO_COVER_MARK))  # the notes' marks
        out.append(([rowset.titles[v], ds, *cells, f"{100 * (t - d):+.2f}"], tr - dr, t - d,
                    e.get("best_trial") == 0))
    return out


def default_vs_tuned(mdir: Path, tdir: Path, rowset: Rows = ROWS, cov: dict | None = None) -> Table | None:
    """Test mAP of every tuned variant with its ``params.yaml`` values (trial 0; stage
    ``default_multilabel@<dataset>``, files under ``<mdir>/default/<dataset>/``) beside its tuned choices (the
    final runs), per tuned data set: each with its bias-corrected bootstrap CI, the
    difference in points and its paired-bootstrap p-value (the two runs share seeds and the
    stratified draws, ``stratified_metric_reps(seed=0)``), Holm-corrected within each data set
    (one family per data set, as in the per-data-set tables). ``cov``: coverage.json; an
    interval whose all-label mAP coverage misses [0.92, 0.98] at the set's shape is not shown
    (°, :mod:`.coverage_rule`); None: every interval shown.
    None when no default run exists."""
    pairs = [p for v in rowset.table1 for p in _dvt_pairs(mdir, tdir, v, rowset, cov)]
    if not pairs:
        return None
    adj, fam = np.ones(len(pairs)), np.ones(len(pairs), dtype=int)  # Holm per data set, as in its table
    for ds in {p[0][1] for p in pairs}:
        idx = [i for i, p in enumerate(pairs) if p[0][1] == ds]
        adj[idx], fam[idx] = holm([paired_pvalue(pairs[i][1]) for i in idx]), len(idx)
    out = []
    for (row, d, delta, sm), q, m in zip(pairs, adj, fam):
        verdict = ("trial 0 won: the same run" if sm else
                   "tuned better" if q < ALPHA and delta > 0 else
                   "tuned worse" if q < ALPHA and delta < 0 else "no significant difference")
        out.append([*row, "-" if sm else format_p(q, d.size, m), verdict])
    up, down = (sum(r[-1] == f"tuned {w}" for r in out) for w in ("better", "worse"))
    return Table("Default (params.yaml, trial 0) vs tuned, on test (mAP, %)",
                 ["Method", "data set", "default", "tuned", "Δ (points)", "p (Holm)", "verdict"], out,
                 note=f"{len(out)} variant x data set pairs: tuning raised test mAP significantly in {up}, "
                      f"lowered it significantly in {down}. Both runs use the final seeds and the same "
                      "stratified bootstrap draws (paired); CIs as in the tables above; p = paired "
                      f"bootstrap tail p (Davison & Hinkley 1997) of the {pairs[0][1].size:,} stored draws, "
                      "no lower than 2 / (draws + 1) times the Holm multiplier (p ≤ that floor where "
                      "no draw crosses zero), Holm over each data set's pairs, alpha 0.05. "
                      "The tuned choice was picked on cross-validated validation mAP, never on test."
                      + (" " + NO_CI_NOTE if any(NO_CI_MARK in c for r in out for c in r[2:4]) else "")
                      + (" " + NO_COVER_NOTE if any(NO_COVER_MARK in c for r in out for c in r[2:4]) else ""))
