"""Figures of the code section (:mod:`contrastlab.reporting.code`): test Rank@k against k
and the training curves (training loss and validation Rank@10 per epoch, seed 0).
"""

from __future__ import annotations

from pathlib import Path

from . import style
from .code_rows import REFERENCE_BASELINE, TITLES


@style.styled
def _rank_curve_figure(data_dir: Path, names: list[str], path: Path, corpus: int = 0,
                       titles: dict | None = None, reference=None) -> bool:
    """``reference``: the ``[1, I]`` test ranks of :data:`REFERENCE_BASELINE`, or ``None``."""
    import matplotlib.pyplot as plt
    import numpy as np

    curves = style.frames(data_dir, names, "_rank_curve.csv")
    if not curves:
        return False
    fig, ax = plt.subplots(figsize=style.figsize(4.2))
    for n, df in curves.items():
        ax.plot(df["k"], 100 * df["rank_at_k"], label=(titles or {}).get(n, n))
    k = np.arange(1, 101)
    if reference is not None:  # the centred zero-shot baseline, every loss's reference
        ax.plot(k, 100 * (reference[0][:, None] <= k[None, :]).mean(0), ls="--", c="0.35", lw=1.4,
                label=TITLES[REFERENCE_BASELINE])
    if corpus:
        ax.plot(k, 100 * k / corpus, ls=":", c="k", lw=0.9, label=f"random (k / {corpus:,})")
    ax.set_xscale("log")
    return style.finish(fig, path, ax, "k", "test Rank@k (%)")


@style.styled
def _training_figure(plots_dir: Path, names: list[str], path: Path,
                     titles: dict | None = None) -> bool:
    import matplotlib.pyplot as plt

    files = style.frames(plots_dir, names)
    if not files:
        return False
    fig, (a1, a2) = plt.subplots(1, 2, figsize=style.figsize(3.8))
    for n, df in files.items():
        if "seed" in df:
            df = df[df["seed"] == df["seed"].min()]
        lab = (titles or {}).get(n, n)
        a1.plot(df["epoch"], df["train_loss"], marker="o", ms=3, label=lab)
        a2.plot(df["epoch"], 100 * df["val_rank_at_10"], marker="o", ms=3, label=lab)
    a1.set_yscale("symlog", linthresh=1e-3)
    a1.set(xlabel="epoch", ylabel="train loss (log; scales differ by loss)")
    a2.set(xlabel="epoch", ylabel="val Rank@10 (%)")
    # one legend under both panels: inside the right panel it covered the curves
    h, lab = a2.get_legend_handles_labels()
    fig.legend(h, lab, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
    style.save(fig, path)
    return True
