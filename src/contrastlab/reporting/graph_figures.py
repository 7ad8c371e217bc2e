"""Figures of the graph section (:mod:`contrastlab.reporting.graph`): probe accuracies with
their CIs, tuning histories, training losses and the PCA of the embeddings. ``titles``:
``{variant: row label}``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from . import style
from .graph_stats import BASELINES
from .graph_text import REFERENCES


@style.styled
def _bar_figure(st: dict, names: list[str], path: Path, dataset: str = "Cora",
                titles: dict[str, str] | None = None) -> None:
    """Mean test accuracy with its 95% CI per variant (blue) and baseline (gray) as points
    with error bars (the axis frames the scores, so it does not start at 0), published
    references as dashed lines labelled in the right margin (labels kept apart)."""
    import matplotlib.pyplot as plt

    s = st["stats"]
    rows = names + [b for b in BASELINES if b in s]
    labels = [textwrap.fill((titles or {}).get(n, BASELINES.get(n, n)), 18) for n in rows]
    means, lows, highs = (np.array([s[n][k] for n in rows]) for k in ("mean", "ci_low", "ci_high"))
    fig, ax = plt.subplots(figsize=style.figsize(4.6))
    x = np.arange(len(rows))
    for xi, n, m, lo, hi in zip(x, rows, means, lows, highs):
        ax.errorbar(xi, m, yerr=[[m - lo], [hi - m]], fmt="o", ms=7,
                    color="tab:blue" if n in names else "tab:gray")
        ax.annotate(f"{m:.3f}", (xi, m), xytext=(9, 0), textcoords="offset points",
                    va="center", ha="left")
    refs = {f"{name} {acc:.3f}": acc for name, acc, _ in (REFERENCES if dataset == "Cora" else [])}
    style.score_axis(ax, [*lows, *highs], include=list(refs.values()))
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.set_xticks(x, labels)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel(f"test accuracy ({st['n_test']} nodes)")
    ax.set_title(f"{dataset} linear probe, mean and 95% CI over seeds and nodes: tuned "
                 "variants (blue), baselines (gray)" + ("; dashed: published" if refs else ""))
    style.reference_lines(ax, refs)
    style.save(fig, path)


@style.styled
def _tuning_figure(plots_dir: Path, names: list[str], path: Path,
                   titles: dict[str, str]) -> bool:
    import matplotlib.pyplot as plt

    have = style.frames(plots_dir, names)
    if not have:
        return False
    fig, ax = plt.subplots(figsize=style.figsize(3.8))
    for n, df in have.items():
        line, = ax.plot(range(1, len(df) + 1), df["best_so_far"], lw=2, label=titles.get(n, n))
        ax.scatter(range(1, len(df) + 1), df["value"], s=14, color=line.get_color(), alpha=0.6)
    return style.finish(fig, path, ax, "trial (same budget for every loss)",
                        "validation accuracy (500 nodes)",
                        "Tuning: each trial (dots) and the best so far (lines)")


@style.styled
def _curve_figure(plots_dir: Path, names: list[str], path: Path,
                  titles: dict[str, str]) -> bool:
    if not (curves := style.frames(plots_dir, names)):
        return False
    fig, axes = style.panels(len(names), height=3.4)
    for ax, n in zip(axes, names):
        if n not in curves:
            ax.set_visible(False)
            continue
        df = curves[n]
        for c in [c for c in df.columns if c.startswith("loss_seed")]:
            ax.plot(df["epoch"], df[c], lw=0.6, alpha=0.5)
        ax.plot(df["epoch"], df["loss"], lw=1.8, color="k", label="mean over seeds")
        ax.set_title(titles.get(n, n))
        ax.set_xlabel("epoch")
    axes[0].set_ylabel("training loss (nats)")
    axes[0].legend()
    style.save(fig, path)
    return True


@style.styled
def _pca_figure(data_dir: Path, names: list[str], path: Path,
                titles: dict[str, str], dataset: str = "Cora") -> bool:
    have = style.frames(data_dir, names, "_pca.csv")
    if not have:
        return False
    fig, axes = style.panels(len(have), height=3.6)
    for ax, (n, df) in zip(axes, have.items()):
        sc = ax.scatter(df["pc1"], df["pc2"], c=df["label"], cmap="tab10", s=3, vmin=0, vmax=9)
        ax.set_title(f"{titles.get(n, n)} (seed {int(df['seed'].iloc[0])})")
        ax.set(xticks=[], yticks=[])
    handles, _ = sc.legend_elements()
    axes[-1].legend(handles, [f"class {i}" for i in range(len(handles))],
                    loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(f"{dataset} encoder embeddings, 2-D PCA, coloured by class")
    style.save(fig, path)
    return True
