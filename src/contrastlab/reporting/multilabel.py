"""Multi-label track section of the comparison report.

Reads ``reports/metrics/multilabel/<dataset>_<variant>.json`` and the bootstrap replicates
``reports/metrics/multilabel/reps/<dataset>_<variant>.npz`` (written by
``train_multilabel@<dataset>-<variant>``), the curves ``reports/plots/multilabel/*.csv``, the
tuned choices ``reports/tuned/multilabel/*.json`` and ``reports/data/multilabel/*``.

Per data set, a table in the format of the Sim-Dis paper's Table 1 (rows: the contrastive
variants, the BCE-trained MLP and the binary-relevance logistic regression; columns micro- and
macro-F1 at threshold 0.5, the same at the global threshold chosen on validation, and mAP),
each cell ``mean [95% CI]`` in %: mean over seeds, percentile CI of the bootstrap over test
rows and seeds (``contrastlab.evaluation.stats``). Bold = best; ``≈`` = not significantly
worse than the best (paired bootstrap on the same draws, Holm-corrected within the column);
``↑`` = significantly better than the logistic regression (same test, Holm). Then the Table 4
ablation (ANY / Sim only / Dis only / Sim-Dis), the Friedman test with the Nemenyi
critical-difference diagram of average ranks across data sets (Demsar 2006), the tuned
choices, curves (training loss and validation mAP per check) and the paper's own numbers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from . import Figure, Section, Table, style

__all__ = ["build_section", "load_metrics", "load_reps", "dataset_stats", "headline",
           "PAPER_TABLE1", "PAPER_TABLE4"]

TITLES = {"all": "ALL", "any": "ANY", "mulsupcon": "MulSupCon",
          "simdis": "Sim-Dis (K·log p, /|P|)", "simdis_sum": "Sim-Dis (K·log p, /ΣK)",
          "simdis_eq13": "Sim-Dis (Eq. 13 literal = ANY's gradient)",
          "sim_only": "Sim only", "dis_only": "Dis only",
          "bce": "BCE MLP (baseline)", "logreg": "Logistic regression (baseline)"}
TABLE1_ROWS = ["all", "any", "mulsupcon", "simdis", "simdis_sum", "simdis_eq13", "sim_only",
               "dis_only", "bce", "logreg"]
CONTRASTIVE = [x for x in TABLE1_ROWS if x not in ("bce", "logreg")]
METRICS = [("micro_f1", "micro-F1 @0.5"), ("macro_f1", "macro-F1 @0.5"),
           ("micro_f1_val_t", "micro-F1 @val-t"), ("macro_f1_val_t", "macro-F1 @val-t"),
           ("map", "mAP")]
ALPHA = 0.05
PAPER_NAMES = {"all": "ALL", "any": "ANY", "mulsupcon": "MulSupCon", "simdis": "Sim-Dis",
               "sim_only": "Sim only", "dis_only": "Dis only"}
#: Sim-Dis paper (Huang et al.) Table 1 (image data, ResNet-50) and Table 2 (AAPD, RoBERTa), in %.
PAPER_TABLE1 = {
    "MS-COCO": {"all": (68.93, 63.32, 64.11), "any": (64.80, 57.37, 56.90),
                "mulsupcon": (71.33, 66.25, 67.69), "simdis": (73.40, 70.03, 69.20)},
    "PASCAL": {"all": (82.53, 79.87, 79.32), "any": (82.31, 79.65, 79.15),
               "mulsupcon": (82.75, 80.26, 79.58), "simdis": (83.63, 81.10, 79.75)},
    "NUS-WIDE": {"all": (70.25, 52.84, 51.35), "any": (68.42, 50.65, 49.28),
                 "mulsupcon": (71.88, 54.36, 52.47), "simdis": (73.35, 57.49, 56.74)},
    "AAPD (RoBERTa)": {"all": (73.23, 59.41, None), "any": (72.31, 58.55, None),
                       "mulsupcon": (73.64, 60.52, None), "simdis": (74.54, 62.31, None)},
}
#: Sim-Dis paper Table 4 (micro-F1, macro-F1 in %): MS-COCO, AAPD.
PAPER_TABLE4 = {
    "any": ((64.80, 57.37), (72.31, 58.55)),
    "sim_only": ((67.22, 62.58), (73.18, 59.89)),
    "dis_only": ((65.95, 59.32), (72.49, 58.03)),
    "simdis": ((73.40, 70.03), (74.54, 62.31)),
}


def load_metrics(metrics_dir: Path) -> dict[str, dict[str, dict]]:
    """``{dataset: {variant: metrics}}`` from ``<dataset>_<variant>.json`` files (a file whose
    name does not end in a known variant is skipped)."""
    out: dict[str, dict[str, dict]] = {}
    names = sorted(TITLES, key=len, reverse=True)  # "simdis_sum" before "simdis"
    for f in sorted(Path(metrics_dir).glob("*.json")):
        for v in names:
            if f.stem.endswith("_" + v):
                out.setdefault(f.stem[: -len(v) - 1], {})[v] = json.loads(f.read_text())
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


def table_stats(runs: dict[str, dict], reps: dict[str, dict[str, np.ndarray]]) -> dict[str, dict]:
    """Per metric: :func:`contrastlab.evaluation.stats.summarize` over the variants that have
    replicates, candidates = every variant but the logistic regression, baseline = the
    logistic regression (when present)."""
    from ..evaluation.stats import summarize

    out = {}
    names = [v for v in TABLE1_ROWS if v in runs and v in reps]
    if len(names) < 2:
        return out
    base = "logreg" if "logreg" in names else None
    cands = [v for v in names if v != base]
    for key, _ in METRICS:
        if not all(key in reps[v] for v in names):
            continue
        out[key] = summarize({v: runs[v][key] for v in names}, {v: reps[v][key] for v in names},
                             alpha=ALPHA, baseline=base, candidates=cands)
    return out


def _cell(st: dict | None, m: dict, key: str) -> str:
    if key not in m:
        return "-"
    if st is None:
        return f"{100 * m[key]:.2f}"
    txt = f"{100 * st['mean']:.2f} [{100 * st['ci_low']:.1f}, {100 * st['ci_high']:.1f}]"
    marks = ""
    if st.get("beats_baseline"):
        marks += " ↑"
    if st.get("is_best"):
        return f"**{txt}**{marks}"
    if st.get("tied_for_best"):
        marks = " ≈" + marks
    return txt + marks


def dataset_stats(ddir: Path, datasets: list[str]) -> list[list]:
    rows = []
    for ds in datasets:
        f = Path(ddir) / f"{ds}_dataset.json"
        if f.exists():
            m = json.loads(f.read_text())
            dropped = m.get("dropped_attributes") or []
            rows.append([ds, m["train"]["n"], m.get("val", {}).get("n", "-"), m["test"]["n"],
                         m.get("train_full", "-"), m.get("n_features", "-"), m.get("n_labels", "-"),
                         f"{m['train']['cardinality']:.2f}", ", ".join(dropped) or "none"])
    return rows


def headline(runs: dict[str, dict[str, dict]], stats: dict[str, dict], fr: dict | None) -> str:
    """One paragraph from the numbers: the winner across data sets (average mAP rank), and per
    data set whether a contrastive variant beats the logistic regression on mAP."""
    parts = []
    if fr:
        ranks = fr["avg_ranks"]
        order = sorted(ranks, key=ranks.get)
        best = order[0]
        tied = [v for v in order[1:] if ranks[v] - ranks[best] <= fr["cd"]]
        parts.append(
            f"Across {fr['n_datasets']} data sets, {TITLES[best]} has the best average mAP rank "
            f"({ranks[best]:.2f} of {fr['n_methods']}); Friedman p = {fr['friedman_p']:.3g}, Nemenyi "
            f"CD = {fr['cd']:.2f}, so {len(tied)} other model(s) are within the critical difference"
            + (f" ({', '.join(TITLES[v] for v in tied[:4])}{', ...' if len(tied) > 4 else ''})." if tied else "."))
        cbest = min((v for v in ranks if v in CONTRASTIVE), key=ranks.get, default=None)
        if cbest and cbest != best:
            parts.append(f"The best-ranked contrastive loss is {TITLES[cbest]} ({ranks[cbest]:.2f}).")
    beat, lose, tie = [], [], []
    for ds, st in stats.items():
        m = st.get("map")
        if not m or "logreg" not in m:
            continue
        cb = [v for v in CONTRASTIVE if v in m and m[v].get("beats_baseline")]
        cbest = max((v for v in CONTRASTIVE if v in m), key=lambda v: m[v]["mean"], default=None)
        if cb:
            beat.append(f"{ds} ({len(cb)} losses)")
        elif cbest and m[cbest]["mean"] < m["logreg"]["mean"]:
            lose.append(ds)
        else:
            tie.append(ds)
    if beat or lose or tie:
        s = "Against the logistic-regression baseline on test mAP (paired bootstrap, Holm): "
        bits = []
        if beat:
            bits.append("a contrastive loss is significantly better on " + ", ".join(beat))
        if tie:
            bits.append("no significant difference on " + ", ".join(tie))
        if lose:
            bits.append("every contrastive loss is below it on " + ", ".join(lose))
        parts.append(s + "; ".join(bits) + ".")
    return " ".join(parts)


def _save(fig, path: Path) -> None:
    style.save(fig, path)


@style.styled
def _curve_figure(ds: str, plots_dir: Path, variants: list[str], path: Path) -> bool:
    """Training loss and validation mAP per check (mean over seeds) of every trained variant;
    one colour per variant in both panels, one legend beside them."""
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=style.figsize(3.8))
    any_curve = False
    for i, v in enumerate(variants):
        f = plots_dir / f"{ds}_{v}.csv"
        if not f.exists() or v == "logreg":
            continue
        df = pd.read_csv(f)
        if "step" not in df:
            continue
        g = df.groupby("step").mean(numeric_only=True).reset_index()
        label = TITLES[v].split(" (")[0] if v not in ("simdis_sum", "simdis_eq13") else v
        if v != "bce":
            ax1.plot(g["step"], g["loss"], color=f"C{i % 10}", label=label)
        ax2.plot(g["step"], g["val_map"], color=f"C{i % 10}", label=label)
        any_curve = True
    ax1.set_title(f"{ds}: contrastive training loss")
    ax1.set_ylabel("training loss")
    ax2.set_title(f"{ds}: validation mAP")
    ax2.set_ylabel("val mAP (ridge probe; BCE: own head)")
    for ax in (ax1, ax2):
        ax.set_xlabel("optimiser step")
    handles, labels = ax2.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right center")
    if any_curve:
        _save(fig, path)
    else:
        plt.close(fig)
    return any_curve


@style.styled
def _weights_figure(ds: str, csv: Path, path: Path) -> None:
    import pandas as pd

    df = pd.read_csv(csv)
    fig, axes = style.panels(5, height=3.0, max_cols=5, sharey=True)
    names = {"R1": "R1 disjoint", "R2": "R2 equal", "R3": "R3 overlap", "R4": "R4 S⊋T", "R5": "R5 S⊊T"}
    for ax, r in zip(axes, ["R1", "R2", "R3", "R4", "R5"]):
        d = df[df["relation"] == r]
        ax.bar(d["bin_left"], d["count"], width=d["bin_right"] - d["bin_left"], align="edge")
        ax.set_title(f"{names[r]}\n{int(d['count'].sum()):,} pairs")
        ax.set_xlabel("$K^s K^d$")
        ax.set_yscale("symlog")
    axes[0].set_ylabel("pairs")
    fig.suptitle(f"{ds}: Sim-Dis weights $K^s K^d$ by relation (training labels)")
    _save(fig, path)


def _add_registry_rows(root: Path) -> None:
    """Rows for losses named in ``multilabel.losses`` beyond the built-in variants (a loss
    added to the registry), titled by ``LossSpec.title``, appended to the row order."""
    from ..losses.registry import get_spec
    from ..params import load_params
    from ..utils import repo_root

    pfile = root / "params.yaml"
    try:
        losses = load_params(pfile if pfile.exists() else repo_root() / "params.yaml").multilabel.losses
    except Exception:  # noqa: BLE001 - the report still renders the built-in rows
        return
    for v in losses:
        if v not in TABLE1_ROWS:
            TABLE1_ROWS.append(v)
            CONTRASTIVE.append(v)
            try:
                TITLES[v] = get_spec(v).title or v
            except Exception:  # noqa: BLE001
                TITLES[v] = v


def build_section(root: Path, figures_dir: Path) -> Section | None:
    """The multi-label section, or None when no multi-label metrics exist."""
    import pandas as pd

    from ..evaluation.stats import friedman_nemenyi, plot_cd

    root = Path(root)
    _add_registry_rows(root)
    mdir = root / "reports" / "metrics" / "multilabel"
    pdir = root / "reports" / "plots" / "multilabel"
    ddir = root / "reports" / "data" / "multilabel"
    tdir = root / "reports" / "tuned" / "multilabel"
    runs = load_metrics(mdir) if mdir.exists() else {}
    runs = {ds: r for ds, r in runs.items() if any("micro_f1_val_t" in m for m in r.values())}
    if not runs:
        return None
    figures_dir = Path(figures_dir)
    s = Section("multilabel", "Multi-label supervised contrastive learning")
    n_seeds = sorted({m.get("n_seeds") for r in runs.values() for m in r.values()})
    s.notes.append(
        "Protocol (docs/multilabel.md): a validation split carved from each training set by iterative "
        "stratification; two feature-masked views per row (MulSupCon's vector-data recipe), MLP encoder + "
        "projection head trained with each loss (optional memory queue), early stopping on validation mAP, "
        "then a linear logistic layer fitted to convergence (L-BFGS) on the frozen encoder. Baselines: the "
        "same MLP trained end to end with BCE, and binary-relevance logistic regression on the features "
        "(C chosen on validation). Temperature, learning rate, masking rate and queue size tuned per "
        "variant with the same budget on validation data only. "
        f"Seeds per cell: {', '.join(str(n) for n in n_seeds)}. Cells: test mean [95% CI] in %; CI = "
        "percentile bootstrap over test rows and seeds (1000 draws shared by all rows of a table). "
        "'@0.5' = F1 at threshold 0.5; '@val-t' = F1 at one global threshold per model chosen on validation "
        "(the threshold in 0.05..0.95 maximising the mean of validation micro- and macro-F1). "
        "Bold = best; ≈ = tied for best (paired bootstrap vs the best, Holm-corrected within the column, "
        "alpha 0.05); ↑ = significantly better than the logistic regression (same test).")
    s.notes.append(
        "Sim-Dis rows: `/|P|` multiplies each positive's log-probability by K^s K^d and divides by the "
        "number of positives; `/ΣK` divides by the sum of the factors instead; `Eq. 13 literal` puts "
        "the factor inside the log as printed, which only adds a constant: its gradient equals ANY's.")
    rows = dataset_stats(ddir, list(runs))
    if rows:
        s.tables.append(Table("Multi-label data sets",
                              ["data set", "train", "validation", "test", "train file rows", "features",
                               "labels", "cardinality (train)", "dropped identifier attributes"], rows,
                              note="tmc2007-500's training file is subsampled (seeded, 4000 rows) before the "
                                   "validation split, for the CPU budget; nominal attributes are one-hot encoded."))
    stats: dict[str, dict] = {}
    for ds, r in runs.items():
        reps = load_reps(mdir / "reps", ds, list(r))
        st = table_stats(r, reps)
        stats[ds] = st
        present = [v for v in TABLE1_ROWS if v in r]
        trs = [[TITLES[v]] + [_cell(st.get(k, {}).get(v), r[v], k) for k, _ in METRICS] for v in present]
        thr = ", ".join(f"{v} {r[v].get('threshold_val', float('nan')):.2f}" for v in present)
        s.tables.append(Table(f"{ds}: Table 1 format (test, %)", ["Method"] + [t for _, t in METRICS], trs,
                              note=f"Mean validation thresholds: {thr}."))
        cur = figures_dir / f"multilabel_{ds}_curves.png"
        if _curve_figure(ds, pdir, present, cur):
            s.figures.append(Figure(f"{ds}: training curves", cur,
                                    "Mean over seeds of the training loss between checks and the validation mAP "
                                    "at each check; training stops after `patience` checks without a better "
                                    "validation mAP and keeps the best checkpoint."))
        wcsv = ddir / f"{ds}_simdis_weights.csv"
        if wcsv.exists():
            wf = figures_dir / f"multilabel_{ds}_simdis_weights.png"
            _weights_figure(ds, wcsv, wf)
            s.figures.append(Figure(f"{ds}: K^s K^d by relation", wf,
                                    "Histogram of the Sim-Dis weight K^s K^d over (anchor, sample) pairs of "
                                    "training rows, by multi-label relation R1..R5 (paper Eq. 8-15)."))
    # Friedman + Nemenyi across data sets (mAP)
    fr = None
    union = [v for v in TABLE1_ROWS if any(v in r for r in runs.values())]
    full = [ds for ds, r in runs.items() if all(v in r for v in union)]
    if len(full) < len(runs):
        s.notes.append(f"Data sets without every model's final runs ({', '.join(d for d in runs if d not in full)}) "
                       "are left out of the Friedman test and the critical-difference diagram.")
    common = union
    if len(full) >= 2 and len(common) >= 3:
        df = pd.DataFrame({v: [runs[ds][v]["map"] for ds in full] for v in common}, index=full)
        fr = friedman_nemenyi(df, higher_is_better=True, alpha=ALPHA)
        cdp = figures_dir / "multilabel_cd_map.png"
        plot_cd({**fr, "avg_ranks": {TITLES[k].split(" (")[0] if k not in ("simdis", "simdis_sum", "simdis_eq13")
                                     else k: v for k, v in fr["avg_ranks"].items()}}, cdp,
                title=f"mAP, {fr['n_datasets']} data sets")
        s.figures.append(Figure("Critical-difference diagram (mAP)", cdp,
                                f"Average ranks over {fr['n_datasets']} data sets (1 = best); models joined by a "
                                f"bar are within the Nemenyi critical difference {fr['cd']:.2f} (alpha {ALPHA}). "
                                f"Friedman chi2 = {fr['friedman_stat']:.2f}, p = {fr['friedman_p']:.3g}."))
        order = sorted(fr["avg_ranks"], key=fr["avg_ranks"].get)
        s.tables.append(Table("Average mAP rank across data sets (Friedman / Nemenyi)",
                              ["Method", "average rank"] + full,
                              [[TITLES[v], f"{fr['avg_ranks'][v]:.2f}"] + [f"{100 * runs[ds][v]['map']:.2f}" for ds in full]
                               for v in order],
                              note=f"Friedman chi2 = {fr['friedman_stat']:.2f}, p = {fr['friedman_p']:.3g}; "
                                   f"Nemenyi CD = {fr['cd']:.2f} at alpha {ALPHA} (Demsar 2006)."))
    s.headline = headline(runs, stats, fr)
    # Table 4 ablation
    abl = [("any", "×", "×"), ("sim_only", "✓", "×"), ("dis_only", "×", "✓"), ("simdis", "✓", "✓")]
    dsl = [ds for ds in runs if all(a in runs[ds] for a, _, _ in abl)]
    if dsl:
        cols = ["Similarity", "Dissimilarity"] + [f"{ds} {t}" for ds in dsl for t in ("micro-F1", "macro-F1")]
        trs = []
        for v, sim, dis in abl:
            row = [sim, dis]
            for ds in dsl:
                st = stats.get(ds, {})
                row += [_cell(st.get("micro_f1_val_t", {}).get(v), runs[ds][v], "micro_f1_val_t"),
                        _cell(st.get("macro_f1_val_t", {}).get(v), runs[ds][v], "macro_f1_val_t")]
            trs.append(row)
        s.tables.append(Table("Ablation in the Table 4 format (ours; F1 at the validation threshold, %)", cols, trs,
                              note="Neither factor = ANY; both = Sim-Dis (/|P| weighting). Marks as in the "
                                   "per-data-set tables (tests over all models of that data set)."))
    # tuned choices
    trow = []
    for v in TABLE1_ROWS:
        f = tdir / f"{v}.json"
        if f.exists():
            t = json.loads(f.read_text())
            p = t.get("params", {})
            trow.append([TITLES[v]] + [(f"{p[k]:.3g}" if isinstance(p.get(k), float) else str(p.get(k, "-")))
                                       for k in ("temperature", "lr", "mask_rate", "queue")]
                        + [f"{t['best_value']:.4f}" if "best_value" in t else "-",
                           f"{t.get('n_complete', '-')}/{t.get('budget_trials', '-')}"])
    if trow:
        s.tables.append(Table("Tuned choices (validation only)",
                              ["Method", "temperature", "learning rate", "masking rate", "queue",
                               "objective (mean val mAP)", "trials"], trow,
                              note="Logistic regression: C picked from multilabel.train.logreg_c by validation mAP "
                                   "inside every run. Objective data sets: multilabel.tune.datasets."))
    # reference numbers from the paper
    ref_rows = []
    for loss in ["all", "any", "mulsupcon", "simdis"]:
        row = [PAPER_NAMES[loss]]
        for dset, vals in PAPER_TABLE1.items():
            v = vals[loss]
            row += [f"{x:.2f}" if x is not None else "-" for x in (v if dset != "AAPD (RoBERTa)" else v[:2])]
        ref_rows.append(row)
    ref_cols = ["Method"]
    for dset in PAPER_TABLE1:
        ref_cols += [f"{dset} {t}" for t in (("micro-F1", "macro-F1", "mAP") if dset != "AAPD (RoBERTa)"
                                            else ("micro-F1", "macro-F1"))]
    s.tables.append(Table(
        "Reference: the Sim-Dis paper's reported numbers (Tables 1 and 2)", ref_cols, ref_rows,
        note="Published numbers, copied from the Sim-Dis paper (docs/sources.md), in %. These are DIFFERENT data sets "
             "(MS-COCO, PASCAL VOC, NUS-WIDE images with ResNet-50; AAPD text with RoBERTa) from ours "
             "(MULAN feature sets with an MLP): compare the ranking of the losses, not the values."))
    t4 = [[PAPER_NAMES[l] if l not in ("any", "simdis") else ("neither (= ANY)" if l == "any" else "both (= Sim-Dis)")]
          + [f"{x:.2f}" for pair in PAPER_TABLE4[l] for x in pair] for l in ["any", "sim_only", "dis_only", "simdis"]]
    s.tables.append(Table("Reference: the paper's Table 4 ablation",
                          ["Factors", "MS-COCO micro-F1", "MS-COCO macro-F1", "AAPD micro-F1", "AAPD macro-F1"],
                          t4, note="Published numbers (%); different data sets from ours."))
    return s
