"""Figures of the multi-label section (:mod:`contrastlab.reporting.multilabel`): training
curves per data set and the Sim-Dis weights by relation.
"""

from __future__ import annotations

from pathlib import Path

from . import style
from .multilabel_rows import BASELINES, ROWS, Rows


@style.styled
def _curve_figure(ds: str, plots_dir: Path, variants: list[str], path: Path, rows: Rows = ROWS) -> bool:
    """Training loss and validation mAP per check (mean over seeds) of every trained variant;
    one colour per variant in both panels, one legend beside them."""
    import matplotlib.pyplot as plt

    frames = style.frames(plots_dir, [f"{ds}_{v}" for v in variants])
    # a scikit-learn baseline has no steps (logreg: its C grid)
    curves = [(i, v, df) for i, v in enumerate(variants)
              if "step" in (df := frames.get(f"{ds}_{v}", {}))]
    if not curves:
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=style.figsize(3.8))
    for i, v, df in curves:
        g = df.groupby("step").mean(numeric_only=True).reset_index()
        label = _legend(v, rows)
        if v not in BASELINES:  # the BCE MLP's loss is not a contrastive loss
            ax1.plot(g["step"], g["loss"], color=f"C{i % 10}", label=label)
        ax2.plot(g["step"], g["val_map"], color=f"C{i % 10}", label=label)
    ax1.set(title=f"{ds}: contrastive training loss", ylabel="training loss",
            xlabel="optimiser step")
    ax2.set(title=f"{ds}: validation mAP", ylabel="val mAP (ridge probe; BCE: own head)",
            xlabel="optimiser step")
    fig.legend(*ax2.get_legend_handles_labels(), loc="outside right center")
    style.save(fig, path)
    return True


def _legend(v: str, rows: Rows) -> str:
    """Legend label of ``v`` in the curve figure: its title up to " (", or its name when an
    earlier row's title starts the same (the Sim-Dis weightings)."""
    head = rows.titles[v].split(" (")[0]
    earlier = list(rows.titles)[:list(rows.titles).index(v)]
    return v if any(rows.titles[u].split(" (")[0] == head for u in earlier) else head


@style.styled
def _weights_figure(ds: str, csv: Path, path: Path) -> None:
    import pandas as pd

    df = pd.read_csv(csv)
    fig, axes = style.panels(5, height=3.0, max_cols=5, sharey=True)
    names = {"R1": "R1 disjoint", "R2": "R2 equal", "R3": "R3 overlap", "R4": "R4 S⊋T", "R5": "R5 S⊊T"}
    for ax, (r, name) in zip(axes, names.items()):
        d = df[df["relation"] == r]
        ax.bar(d["bin_left"], d["count"], width=d["bin_right"] - d["bin_left"], align="edge")
        ax.set_title(f"{name}\n{int(d['count'].sum()):,} pairs")
        ax.set_xlabel("$K^s K^d$")
        ax.set_yscale("symlog")
    axes[0].set_ylabel("pairs")
    fig.suptitle(f"{ds}: Sim-Dis weights $K^s K^d$ by relation (training labels)")
    style.save(fig, path)
