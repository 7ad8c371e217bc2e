"""Multi-label track section of the comparison report.

Reads ``reports/metrics/multilabel/<dataset>_<loss>.json`` (written by
``train_multilabel@<dataset>-<loss>``), ``reports/plots/multilabel/*.csv`` and
``reports/data/multilabel/*`` and builds, per data set, a table in the format of the Sim-Dis
paper's Table 1 (rows ALL, ANY, MulSupCon, Sim-Dis, BCE baseline; columns micro-F1,
macro-F1, mAP as mean ± std over seeds, in %), the Table 4 ablation (ANY = neither factor,
Sim only, Dis only, Sim-Dis = both), the paper's own numbers as a separate reference table,
and figures (bars with error bars over seeds, training curves, the K^s K^d histogram by
relation R1..R5 on the training labels).

Significance: a cell is marked † when a paired t-test over seeds (``scipy.stats.ttest_rel``,
pairs = same seed, which also means the same encoder initialisation) between that row and
Sim-Dis gives p < 0.05; nothing is called better or worse otherwise.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from . import Figure, Section, Table, fmt_mean_std, variant_titles, wall_time

__all__ = ["build_section", "load_metrics", "paired_pvalue", "PAPER_TABLE1", "PAPER_TABLE4"]



class _Titles(dict):
    """Row labels: the registry's :attr:`LossSpec.title` for any registered loss."""

    def __missing__(self, key: str) -> str:
        from ..losses.registry import title

        return title(key)


TITLES = _Titles({"bce": "BCE baseline (no contrastive phase)"})
#: Losses shown only in the factor ablation (Table 4 format), not in the Table 1 format.
ABLATION_ONLY = ("sim_only", "dis_only")


def _losses(root: Path | None = None) -> list[str]:
    """Loss names in report order: ``multilabel.losses`` of params.yaml (registry order when
    it cannot be read), the BCE baseline last."""
    from ..params.multilabel import known_losses

    names = list(variant_titles(root, "multilabel")) if root is not None else []
    names = names or known_losses()
    return [x for x in names if x != "bce"] + (["bce"] if "bce" in names else [])
METRICS = [("micro_f1", "micro-F1"), ("macro_f1", "macro-F1"), ("map", "mAP")]
ALPHA = 0.05

#: Sim-Dis paper (docs/sources.md) Table 1 (image data, ResNet-50) and Table 2 (AAPD, RoBERTa), in %.
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
    """``{dataset: {loss: metrics}}`` from ``<dataset>_<loss>.json`` files (unknown suffixes skipped)."""
    out: dict[str, dict[str, dict]] = {}
    from ..params.multilabel import known_losses

    losses = sorted(known_losses(), key=len, reverse=True)  # match "sim_only" before "only"...
    for f in sorted(Path(metrics_dir).glob("*.json")):
        stem = f.stem
        for loss in losses:
            if stem.endswith("_" + loss):
                ds = stem[: -len(loss) - 1]
                out.setdefault(ds, {})[loss] = json.loads(f.read_text())
                break
    return out


def _seed_values(m: dict, key: str) -> dict[int, float]:
    pre = f"{key}_seed"
    return {int(k[len(pre):]): float(v) for k, v in m.items()
            if k.startswith(pre) and k[len(pre):].isdigit()}


def paired_pvalue(a: dict, b: dict, key: str) -> float | None:
    """Two-sided paired t-test p-value over the seeds both runs share (None if < 3 pairs or
    the differences are all equal)."""
    from scipy.stats import ttest_rel

    sa, sb = _seed_values(a, key), _seed_values(b, key)
    common = sorted(set(sa) & set(sb))
    if len(common) < 3:
        return None
    x = np.array([sa[s] for s in common])
    y = np.array([sb[s] for s in common])
    d = x - y
    if np.allclose(d, d[0]):
        return 0.0 if abs(d[0]) > 1e-12 else None
    p = float(ttest_rel(x, y).pvalue)
    return None if math.isnan(p) else p


def _cell(m: dict | None, key: str, ref: dict | None = None) -> str:
    if m is None or key not in m:
        return "-"
    s = fmt_mean_std(100 * m[key], 100 * m.get(f"{key}_std", float("nan")), 2)
    if ref is not None and ref is not m:
        p = paired_pvalue(m, ref, key)
        if p is not None and p < ALPHA:
            s += " †"
    return s


def _same_seeds(a: dict, b: dict) -> bool:
    keys = [k for k in a if "_seed" in k and k.split("_seed")[0] in ("micro_f1", "macro_f1", "map")]
    return bool(keys) and all(k in b and a[k] == b[k] for k in keys)


def _bold_best(rows: list[list[str]], ms: list[dict | None], keys: list[str], first_col: int = 1) -> None:
    for j, key in enumerate(keys):
        vals = [m.get(key) if m else None for m in ms]
        good = [v for v in vals if v is not None]
        if not good:
            continue
        best = max(good)
        for i, v in enumerate(vals):
            if v is not None and v == best:
                rows[i][first_col + j] = f"**{rows[i][first_col + j]}**"


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)


def _bar_figure(ds: str, runs: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = (["bce"] if "bce" in runs else []) + [x for x in _losses() if x in runs and x != "bce"]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    width = 0.8 / max(1, len(order))
    xs = np.arange(len(METRICS))
    for i, loss in enumerate(order):
        m = runs[loss]
        mean = [100 * m.get(k, np.nan) for k, _ in METRICS]
        std = [100 * m.get(f"{k}_std", 0.0) for k, _ in METRICS]
        ax.bar(xs + (i - (len(order) - 1) / 2) * width, mean, width, yerr=std, capsize=2,
               label=TITLES[loss].split(" (")[0])
    ax.set_xticks(xs, [t for _, t in METRICS])
    ax.set_ylabel("% (mean ± std over seeds)")
    ax.set_title(f"{ds}: test metrics by loss")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    _save(fig, path)


def _curve_figure(ds: str, plots_dir: Path, losses: list[str], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
    any_curve = False
    for loss in losses:
        f = plots_dir / f"{ds}_{loss}.csv"
        if not f.exists():
            continue
        df = pd.read_csv(f)
        ax = ax2 if loss == "bce" else ax1
        ax.plot(df["epoch"], df["loss"], label=TITLES[loss].split(" (")[0])
        if "loss_std" in df:
            ax.fill_between(df["epoch"], df["loss"] - df["loss_std"], df["loss"] + df["loss_std"], alpha=0.2)
        any_curve = True
    ax1.set_title(f"{ds}: contrastive phase")
    ax2.set_title(f"{ds}: BCE baseline")
    for ax in (ax1, ax2):
        ax.set_xlabel("epoch")
        ax.set_ylabel("training loss (mean over seeds)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    if any_curve:
        _save(fig, path)
    else:
        plt.close(fig)
    return any_curve


def _weights_figure(ds: str, csv: Path, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    df = pd.read_csv(csv)
    fig, axes = plt.subplots(1, 5, figsize=(12, 2.6), sharey=True)
    names = {"R1": "R1 disjoint", "R2": "R2 equal", "R3": "R3 overlap", "R4": "R4 S⊋T", "R5": "R5 S⊊T"}
    for ax, r in zip(axes, ["R1", "R2", "R3", "R4", "R5"]):
        d = df[df["relation"] == r]
        ax.bar(d["bin_left"], d["count"], width=d["bin_right"] - d["bin_left"], align="edge")
        ax.set_title(f"{names[r]} ({int(d['count'].sum())})", fontsize=8)
        ax.set_xlabel("$K^s K^d$")
        ax.set_yscale("symlog")
    axes[0].set_ylabel("pairs")
    fig.suptitle(f"{ds}: Sim-Dis weights $K^s K^d$ by relation (training labels)", fontsize=9, y=1.06)
    _save(fig, path)


def build_section(root: Path, figures_dir: Path) -> Section | None:
    """The multi-label section, or None when no multi-label metrics exist."""
    mdir = Path(root) / "reports" / "metrics" / "multilabel"
    pdir = Path(root) / "reports" / "plots" / "multilabel"
    ddir = Path(root) / "reports" / "data" / "multilabel"
    runs = load_metrics(mdir) if mdir.exists() else {}
    if not runs:
        return None
    figures_dir = Path(figures_dir)
    s = Section("multilabel", "Multi-label supervised contrastive learning (Sim-Dis paper protocol)")
    any_run = next(iter(next(iter(runs.values())).values()))
    thr = any_run.get("threshold", 0.5)
    s.notes.append(
        "Two-phase protocol of the Similarity-Dissimilarity paper (App. C.4): MLP encoder + 2-layer "
        "projection head to 256-d trained with each contrastive loss (T = 0.07, cosine schedule with 5% "
        "warm-up), then a linear BCE classifier on the frozen encoder; the BCE baseline trains the encoder "
        f"with BCE directly. Test-split metrics in %, mean ± sample std over seeds; F1 at threshold {thr}; "
        "mAP = macro average precision. † = paired t-test over seeds against Sim-Dis gives p < 0.05 "
        "(with 3 seeds this test has little power: unmarked differences are not established). "
        "Bold = highest mean in the column.")
    try:  # which Sim-Dis weighting produced these rows (the params the report runs with)
        from ..params import load_params

        var = load_params(Path(root) / "params.yaml").multilabel.variants
        w = {x: var[x].kwargs.get("weighting", "numerator") for x in ("simdis", "sim_only", "dis_only")}
        s.notes.append("Sim-Dis factor weighting: " + ", ".join(f"{TITLES[x]} `{v}`" for x, v in w.items())
                       + " (`numerator` = Eq. 13 literally, gradient equal to ANY's; `log_prob` = the factor "
                         "multiplies each positive's log-probability; see docs/multilabel.md).")
    except Exception:  # no/invalid params file: the section still renders
        pass
    # data set statistics
    rows = []
    for ds in runs:
        f = ddir / f"{ds}_dataset.json"
        if f.exists():
            m = json.loads(f.read_text())
            rows.append([ds, m["train"]["n"], m.get("train_full", m["train"]["n"]), m["test"]["n"],
                         m.get("n_features", "-"), m.get("n_labels", "-"),
                         f"{m['train']['cardinality']:.2f}", f"{m['test']['cardinality']:.2f}"])
    if rows:
        s.tables.append(Table("Multi-label data sets (MULAN and others)",
                              ["data set", "train used", "train full", "test", "features", "labels",
                               "cardinality (train)", "cardinality (test)"], rows,
                              note="tmc2007-500's train split is subsampled (seeded) to fit the CPU budget "
                                   "(multilabel.data.tmc2007-500.max_train)."))
    for ds, r in runs.items():
        ref = r.get("simdis")
        extra = [k for k in sorted(next(iter(r.values()))) if k.startswith("p_at_") and k[5:].isdigit()]
        if "knn_purity" in next(iter(r.values())):
            extra.append("knn_purity")
        keys = [k for k, _ in METRICS] + extra
        cols = ["Method"] + [t for _, t in METRICS] + [k.replace("p_at_", "P@") if k.startswith("p_at_")
                                                       else "kNN@5 problem×tier" for k in extra]
        present = [x for x in _losses(root) if x in r and x not in ABLATION_ONLY]
        ms = [r[x] for x in present]
        trs = [[TITLES[x]] + [_cell(r[x], k, ref) for k in keys] for x in present]
        _bold_best(trs, ms, keys)
        same = [TITLES[x] for x in ("simdis", "sim_only", "dis_only")
                if x in r and "any" in r and _same_seeds(r[x], r["any"])]
        if same:
            s.notes.append(f"{ds}: {', '.join(same)} gave exactly ANY's per-seed results. Expected when the "
                           "Sim-Dis factor is applied literally inside the log (Eq. 13, weighting: numerator): "
                           "it only adds a constant, so the gradient equals ANY's (docs/multilabel.md).")
        dj = ddir / f"{ds}_dataset.json"
        if "knn_purity" in extra and dj.exists():
            tp = json.loads(dj.read_text()).get("knn_purity_teacher")
            if tp is not None:
                s.notes.append(f"{ds}: kNN@5 problem×tier purity of the frozen teacher states themselves "
                               f"(before any training): {100 * tp:.2f}%.")
        secs = float(np.nansum([wall_time(root, "multilabel", f"{ds}_{x}", m) for x, m in r.items()]))
        s.tables.append(Table(f"{ds}: Table 1 format", cols, trs,
                              note=f"{any_run.get('n_seeds', '?')} seeds; training wall time of the "
                                   f"{len(r)} variants: {secs:.0f} s."))
        # figures
        bar = figures_dir / f"multilabel_{ds}_bars.png"
        _bar_figure(ds, r, bar)
        s.figures.append(Figure(f"{ds}: metrics by loss", bar, "Bars: mean over seeds; error bars: std."))
        cur = figures_dir / f"multilabel_{ds}_curves.png"
        if _curve_figure(ds, pdir, list(r), cur):
            s.figures.append(Figure(f"{ds}: training curves", cur,
                                    "Mean training loss per epoch over seeds (band: ± std)."))
        wcsv = ddir / f"{ds}_simdis_weights.csv"
        if wcsv.exists():
            wf = figures_dir / f"multilabel_{ds}_simdis_weights.png"
            _weights_figure(ds, wcsv, wf)
            s.figures.append(Figure(f"{ds}: K^s K^d by relation", wf,
                                    "Histogram of the Sim-Dis weight K^s K^d over (anchor, sample) pairs of "
                                    "training rows, by multi-label relation R1..R5 (paper Eq. 8-15)."))
    # Table 4 ablation over our data sets
    abl = [("any", "×", "×"), ("sim_only", "✓", "×"), ("dis_only", "×", "✓"), ("simdis", "✓", "✓")]
    dsl = [ds for ds in runs if any(a in runs[ds] for a, _, _ in abl)]
    if dsl:
        cols = ["Similarity", "Dissimilarity"] + [f"{ds} {t}" for ds in dsl for t in ("micro-F1", "macro-F1")]
        rows = []
        for loss, sim, dis in abl:
            row = [sim, dis]
            for ds in dsl:
                m = runs[ds].get(loss)
                row += [_cell(m, "micro_f1", runs[ds].get("simdis")), _cell(m, "macro_f1", runs[ds].get("simdis"))]
            rows.append(row)
        s.tables.append(Table("Ablation in the Table 4 format (ours)", cols, rows,
                              note="Neither factor = ANY; both = Sim-Dis. † as above."))
    # reference numbers from the paper
    ref_rows = []
    for loss in ["all", "any", "mulsupcon", "simdis"]:
        row = [TITLES[loss]]
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
    t4 = [[TITLES[l] if l not in ("any", "simdis") else ("neither (= ANY)" if l == "any" else "both (= Sim-Dis)")]
          + [f"{x:.2f}" for pair in PAPER_TABLE4[l] for x in pair] for l in ["any", "sim_only", "dis_only", "simdis"]]
    s.tables.append(Table("Reference: the paper's Table 4 ablation",
                          ["Factors", "MS-COCO micro-F1", "MS-COCO macro-F1", "AAPD micro-F1", "AAPD macro-F1"],
                          t4, note="Published numbers (%); different data sets from ours."))
    return s
