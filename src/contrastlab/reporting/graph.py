"""Graph self-supervised track section of the comparison report (Cora, public split).

Reads ``reports/metrics/graph/<variant>.json`` (``evaluate_graph@<variant>``),
``reports/plots/graph/<variant>.csv`` (per-epoch losses) and
``reports/data/graph/<variant>_pca.csv`` (2-D PCA of the embeddings) and builds:

- a table: variant, linear-probe test accuracy mean ± std over seeds for the standard
  protocol (logistic regression, C chosen on validation) and the notebook's protocol
  (``nn.Linear``, 200 Adam steps), seeds, training time per run, and the difference of
  the standard probe to the best reference row;
- reference rows: the seed notebook's reported accuracies (SimCLR 0.791, MixCo 0.693,
  MoCHi 0.784, its own probe, one run), GRACE (Zhu et al. 2020; about 0.82 on the public
  split as reproduced in later work) and DGI (Velickovic et al. 2019, Table 2: 0.823);
- figures: bars with error bars over seeds per probe, loss curves per variant, and a PCA
  scatter of each variant's embeddings coloured by class.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import Figure, Section, Table, fmt_mean_std, variant_titles, wall_time

__all__ = ["build_section", "REFERENCES", "load_graph_metrics"]

#: ``{variant: row label}``; filled from params.yaml + the loss registry by :func:`build_section`.
TITLES: dict[str, str] = {}

#: (name, accuracy, protocol/source) of the reference rows.
REFERENCES: list[tuple[str, float, str]] = [
    ("Notebook SimCLR (seed 004)", 0.791, "notebook probe, 1 run, positive twice in NT-Xent"),
    ("Notebook MixCo (seed 004)", 0.693, "notebook probe, 1 run, view 1 unused"),
    ("Notebook MoCHi (seed 004)", 0.784, "notebook probe, 1 run, 180 epochs"),
    ("GRACE (Zhu et al. 2020)", 0.82, "logistic regression, public split (approx.)"),
    ("DGI (Velickovic et al. 2019)", 0.823, "logistic regression, public split, Table 2"),
]


def load_graph_metrics(metrics_dir: Path) -> dict[str, dict]:
    """``{variant: metrics}`` from ``reports/metrics/graph/*.json``."""
    return {f.stem: json.loads(f.read_text()) for f in sorted(Path(metrics_dir).glob("*.json"))}


def _seed_values(m: dict, key: str) -> list[float]:
    pre = f"{key}_seed"
    return [float(v) for k, v in sorted(m.items()) if k.startswith(pre) and k[len(pre):].isdigit()]


def _order(variants) -> list[str]:
    known = [v for v in TITLES if v in variants]
    return known + sorted(v for v in variants if v not in TITLES)


def _save(fig, path: Path) -> None:
    from ..io import atomic_path

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")


def _bar_figure(metrics: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = _order(metrics)
    probes = [("logreg_acc", "standard probe (logistic regression)"),
              ("notebook_acc", "notebook probe (nn.Linear, 200 Adam steps)")]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.38
    x = np.arange(len(names))
    for k, (key, label) in enumerate(probes):
        means = [metrics[n].get(f"{key}_mean", np.nan) for n in names]
        stds = [metrics[n].get(f"{key}_std", 0.0) for n in names]
        ax.bar(x + (k - 0.5) * width, means, width, yerr=stds, capsize=4, label=label)
        for i, n in enumerate(names):  # individual seeds
            vals = _seed_values(metrics[n], key)
            ax.scatter([x[i] + (k - 0.5) * width] * len(vals), vals, s=8, color="k", zorder=3)
    for k, (name, acc, _) in enumerate(REFERENCES[3:]):
        ax.axhline(acc, ls="--", lw=0.8, color="gray")
        ax.text(-0.5 if k % 2 == 0 else len(names) - 0.5, acc,
                f" {name.split(' (')[0]} {acc:.3f} ", va="bottom",
                ha="left" if k % 2 == 0 else "right", fontsize=7, color="gray")
    ax.set_xticks(x, [TITLES.get(n, n) for n in names])
    lo = min([metrics[n].get("notebook_acc_mean", 0.7) for n in names] + [0.75]) - 0.05
    ax.set_ylim(max(0.0, lo), 0.86)
    ax.set_ylabel("test accuracy (1000 nodes)")
    ax.set_title("Cora linear probe: mean ± std over seeds (dots = seeds)")
    ax.legend(fontsize=7, loc="lower left")
    _save(fig, path)
    plt.close(fig)


def _curve_figure(plots_dir: Path, names: list[str], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, axes = plt.subplots(1, len(names), figsize=(3.3 * len(names), 3), squeeze=False)
    drawn = False
    for ax, n in zip(axes[0], names):
        f = plots_dir / f"{n}.csv"
        if not f.exists():
            ax.set_visible(False)
            continue
        df = pd.read_csv(f)
        for c in [c for c in df.columns if c.startswith("loss_seed")]:
            ax.plot(df["epoch"], df[c], lw=0.6, alpha=0.5)
        ax.plot(df["epoch"], df["loss"], lw=1.5, color="k", label="mean over seeds")
        ax.set_title(TITLES.get(n, n), fontsize=9)
        ax.set_xlabel("epoch")
        drawn = True
    axes[0][0].set_ylabel("training loss (nats)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    if drawn:
        _save(fig, path)
    plt.close(fig)
    return drawn


def _pca_figure(data_dir: Path, names: list[str], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    have = [n for n in names if (data_dir / f"{n}_pca.csv").exists()]
    if not have:
        return False
    fig, axes = plt.subplots(1, len(have), figsize=(3.4 * len(have), 3.3), squeeze=False)
    for ax, n in zip(axes[0], have):
        df = pd.read_csv(data_dir / f"{n}_pca.csv")
        sc = ax.scatter(df["pc1"], df["pc2"], c=df["label"], cmap="tab10", s=3, vmin=0, vmax=9)
        ax.set_title(f"{TITLES.get(n, n)} (seed {int(df['seed'].iloc[0])})", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    handles, _ = sc.legend_elements()
    axes[0][-1].legend(handles, [f"class {i}" for i in range(len(handles))], fontsize=6,
                       loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("Cora encoder embeddings, 2-D PCA, coloured by class", fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True


def _train_s_per_run(root: Path, variant: str, m: dict) -> float:
    """Mean training wall seconds per seed: ``time_s_per_seed`` of the timings file
    ``reports/timings/graph/<variant>.json`` (:mod:`contrastlab.timings`), else the
    ``time_s`` an older metrics file still holds; NaN when neither."""
    from ..timings import read_timing

    per = (read_timing("graph", variant, root) or {}).get("time_s_per_seed")
    if per:
        return float(sum(per) / len(per))
    return wall_time(root, "graph", variant, m) if "time_s" in m else float("nan")


def build_section(root: Path, figures_dir: Path, digits: int = 3) -> Section | None:
    """The graph track's report section, or ``None`` when no graph metrics exist yet."""
    root = Path(root)
    metrics = load_graph_metrics(root / "reports" / "metrics" / "graph")
    if not metrics:
        return None
    TITLES.clear()
    TITLES.update(variant_titles(root, "graph", list(metrics)))
    names = _order(metrics)
    best_ref = max(acc for _, acc, _ in REFERENCES)
    rows = []
    for n in names:
        m = metrics[n]
        lr_mean = m.get("logreg_acc_mean")
        rows.append([
            TITLES.get(n, n),
            fmt_mean_std(lr_mean, m.get("logreg_acc_std"), digits),
            fmt_mean_std(m.get("notebook_acc_mean"), m.get("notebook_acc_std"), digits),
            int(m.get("n_seeds", 0)), int(m.get("epochs", 0)),
            f"{_train_s_per_run(root, n, m):.1f}",
            f"{lr_mean - best_ref:+.{digits}f}" if lr_mean is not None else "-",
        ])
    for name, acc, how in REFERENCES:
        is_nb = name.startswith("Notebook")
        rows.append([f"*{name}*", "-" if is_nb else f"{acc:.{digits}f}",
                     f"{acc:.{digits}f}" if is_nb else "-", 1 if is_nb else "-", "-", "-",
                     f"{acc - best_ref:+.{digits}f}" if not is_nb else "-"])
    table = Table(
        "Cora node classification, linear probe on the frozen GCN encoder (public split)",
        ["variant", "standard probe acc", "notebook probe acc", "seeds", "epochs",
         "train s / run", f"Δ vs best ref ({best_ref:.3f})"],
        rows,
        note=("Test accuracy on the 1000 test nodes, mean ± sample std over seeds. Standard "
              "probe: logistic regression on the encoder outputs (z-scored with the training "
              "nodes' statistics by default, graph.probe.normalize), C chosen on the 500 "
              "validation nodes. Notebook probe: nn.Linear, 200 Adam steps (lr 0.01) on "
              "the 140 training nodes. Italic rows are references: the notebook's single "
              "runs (its own probe, with the bugs listed in DESIGN.md) and published "
              "public-split results (GRACE approx. 0.82; DGI 0.823, Velickovic et al. 2019)."),
    )
    s = Section("graph", "Graph self-supervised learning on Cora (SimCLR / MixCo / MoCHi)")
    s.tables.append(table)
    figures_dir = Path(figures_dir)
    bar = figures_dir / "graph_probe_accuracy.png"
    _bar_figure(metrics, bar)
    s.figures.append(Figure("Cora probe accuracy by loss", bar,
                            "Bars: mean over seeds; error bars: std; dots: single seeds; "
                            "dashed: published references."))
    curves = figures_dir / "graph_loss_curves.png"
    if _curve_figure(root / "reports" / "plots" / "graph", names, curves):
        s.figures.append(Figure("Training loss per epoch", curves,
                                "Thin lines: seeds; thick: mean. Losses differ in scale "
                                "across variants (MixCo adds its mix-up term, MoCHi adds "
                                "synthetic negatives)."))
    pca = figures_dir / "graph_embeddings_pca.png"
    if _pca_figure(root / "reports" / "data" / "graph", names, pca):
        s.figures.append(Figure("Cora embeddings (PCA)", pca,
                                "First seed's encoder outputs projected to 2-D with PCA."))
    return s
