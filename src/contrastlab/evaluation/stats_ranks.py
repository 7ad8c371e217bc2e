"""Ranks across data sets: the Friedman test with Nemenyi's critical difference and its
diagram (Demsar, JMLR 2006, Sec. 3.2.2; :mod:`contrastlab.evaluation.stats`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["friedman_nemenyi", "plot_cd"]


def friedman_nemenyi(scores, *, higher_is_better: bool = True, alpha: float = 0.05) -> dict:
    """Friedman test and Nemenyi critical difference of methods across data sets (Demsar 2006).

    Args:
        scores: ``pandas.DataFrame`` ``[datasets x methods]`` of one metric (no NaN).
        higher_is_better: rank 1 = the highest score when True.
        alpha: level of the Nemenyi critical difference.

    Returns:
        ``{"avg_ranks": {method: rank}, "friedman_stat", "friedman_p", "cd", "n_datasets",
        "n_methods", "alpha", "pairwise_p": {m1: {m2: p}}}``; ``cd`` =
        ``q_alpha sqrt(k(k+1)/(6N))`` with ``q_alpha`` the studentized-range quantile / sqrt 2.
        Two methods differ significantly when their average ranks differ by more than ``cd``.

    Raises:
        ValueError: fewer than 2 data sets or 3 methods, or missing values.
    """
    import pandas as pd
    from scipy.stats import friedmanchisquare, rankdata, studentized_range

    df = pd.DataFrame(scores).astype(float)
    n, k = df.shape
    if n < 2 or k < 3:
        raise ValueError(f"need >= 2 data sets and >= 3 methods (got {n} x {k})")
    if df.isna().any().any():
        raise ValueError("scores contain missing values: "
                         f"{df.columns[df.isna().any()].tolist()}")
    vals = df.to_numpy()
    ranks = np.vstack([rankdata(-row if higher_is_better else row) for row in vals])
    avg = ranks.mean(0)
    stat, p = friedmanchisquare(*vals.T)
    q_alpha = float(studentized_range.ppf(1 - alpha, k, np.inf)) / np.sqrt(2)
    cd = q_alpha * np.sqrt(k * (k + 1) / (6.0 * n))
    try:
        import scikit_posthocs as sp

        # posthoc_nemenyi_friedman ranks with "higher is better" internally? It ranks each
        # block ascending; the p-values depend only on |rank differences|, so direction is moot.
        pw = sp.posthoc_nemenyi_friedman(df.to_numpy())
        pw.index = pw.columns = list(df.columns)
        pairwise = {a: {b: float(pw.loc[a, b]) for b in df.columns} for a in df.columns}
    except ImportError:  # optional: the CD itself needs only scipy
        pairwise = {}
    return {"avg_ranks": {m: float(r) for m, r in zip(df.columns, avg)},
            "friedman_stat": float(stat), "friedman_p": float(p), "cd": float(cd),
            "n_datasets": int(n), "n_methods": int(k), "alpha": alpha, "pairwise_p": pairwise}


def plot_cd(result: dict, path: str | Path, *, title: str = "") -> Path:
    """Critical-difference diagram (Demsar 2006, Fig. 1) of :func:`friedman_nemenyi`'s result.

    Methods sit on an axis of average rank (1 = best, left); a bar of length ``cd`` is drawn
    and methods whose ranks differ by less than ``cd`` are joined by a thick line (not
    significantly different). Writes a PNG to ``path`` atomically and returns the path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    ranks, cd = result["avg_ranks"], result["cd"]
    k = len(ranks)
    names = sorted(ranks, key=ranks.get)
    order = [ranks[m] for m in names]
    # cliques: maximal runs of consecutive (by rank) methods within cd of each other
    bars: list[tuple[int, int]] = []
    for i in range(k):
        j = i
        while j + 1 < k and order[j + 1] - order[i] < cd:
            j += 1
        if j > i and not any(a <= i and j <= b for a, b in bars):
            bars.append((i, j))
    half = (k + 1) // 2
    n_rows = max(half, k - half)
    # vertical layout in "row" units: ticks and CD bar on top, cliques, then method labels
    top, y_axis = 0.0, -1.2
    y_bar0 = y_axis - 0.5
    y_lab0 = y_bar0 - 0.45 * len(bars) - 0.4
    bottom = y_lab0 - 0.7 * n_rows
    fig, ax = plt.subplots(figsize=(10, 0.35 * (top - bottom) + 0.3), dpi=100)
    lo, hi = 1, k
    ax.set_xlim(lo - 0.9, hi + 0.9)
    ax.set_ylim(bottom, top + 0.3)
    ax.axis("off")
    ax.hlines(y_axis, lo, hi, color="k", lw=1)
    for t in range(lo, hi + 1):
        ax.vlines(t, y_axis, y_axis + 0.25, color="k", lw=1)
        ax.text(t, y_axis + 0.35, str(t), ha="center", va="bottom", fontsize=10)
    ax.hlines(top, lo, lo + cd, color="tab:red", lw=2)
    ax.vlines([lo, lo + cd], top - 0.15, top + 0.15, color="tab:red", lw=2)
    ax.text(lo + cd + 0.05, top, f"CD = {cd:.2f}", ha="left", va="center", fontsize=10,
            color="tab:red")
    for n_bar, (i, j) in enumerate(bars):
        yb = y_bar0 - 0.45 * n_bar
        ax.hlines(yb, order[i] - 0.04, order[j] + 0.04, color="tab:blue", lw=4)
    for j, m in enumerate(names):
        r = ranks[m]
        left = j < half
        y = y_lab0 - 0.7 * (j if left else k - 1 - j)
        x_text = lo - 0.15 if left else hi + 0.15
        ax.plot([r, r, x_text], [y_axis, y, y], color="k", lw=0.8)
        ax.text(x_text - 0.05 if left else x_text + 0.05, y, f"{m} ({r:.2f})",
                ha="right" if left else "left", va="center", fontsize=10)
    if title:
        ax.set_title(title, fontsize=11)
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", bbox_inches="tight")
    plt.close(fig)
    return path
