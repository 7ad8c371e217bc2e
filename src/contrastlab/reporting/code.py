"""Code retrieval track section of the comparison report (retrieval experiment notes; docs/sources.md).

Reads ``reports/metrics/code/<variant>.json`` (``evaluate_code@<variant>``),
``reports/plots/code/<variant>.csv`` (per-epoch train loss and val Rank@10) and
``reports/data/code/<variant>_rank_curve.csv`` (test Rank@k for k = 1..100), and builds:

- a table: test Rank@1/5/10 (%), MRR, median rank, mean cosine to the true body, corpus
  size, best epoch, training seconds, and the Rank@10 difference to the Exp 1.4 target;
- reference rows from the retrieval experiment notes: Exp 1.3 (SmoothL1, Qwen2.5-Coder-3B layer 18, corpus
  49,631): test Rank@1 0.03 %, Rank@10 0.24 %; Exp 1.4 targets: Rank@1 > 1 %, Rank@10 > 5 %;
- figures: Rank@k against k per variant, training curves (loss and val Rank@10), a bar
  chart of test Rank@1/5/10.

One run per variant (no seeds), so there are no error bars.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import Figure, Section, Table, variant_titles, wall_time

__all__ = ["build_section", "REFERENCES", "TITLES"]

#: ``{variant: row label}``; filled from params.yaml + the loss registry by :func:`build_section`.
TITLES: dict[str, str] = {}

#: The retrieval experiment notes' rows.
REFERENCES = [
    # (name, Rank@1 %, Rank@10 %, corpus, Rank@10 - 5 % target in points)
    ("Retrieval notes Exp 1.3 SmoothL1 (test, Qwen2.5-Coder-3B L18, reported)", "0.03", "0.24", 49631, -4.76),
    ("Retrieval notes Exp 1.4 target (test; a target, not a result)", "> 1", "> 5", 49631, None),
]
TARGET_R10 = 0.05


def _order(names) -> list[str]:
    return [v for v in TITLES if v in names] + sorted(v for v in names if v not in TITLES)


def _save(fig, path: Path) -> None:
    from ..io import atomic_path

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rank_curve_figure(data_dir: Path, names: list[str], path: Path, corpus: int = 0) -> bool:
    import pandas as pd

    curves = {n: data_dir / f"{n}_rank_curve.csv" for n in names}
    curves = {n: p for n, p in curves.items() if p.exists()}
    if not curves:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for n, p in curves.items():
        df = pd.read_csv(p)
        ax.plot(df["k"], 100 * df["rank_at_k"], label=TITLES.get(n, n))
    if corpus:
        import numpy as np

        k = np.arange(1, 101)
        ax.plot(k, 100 * k / corpus, ls=":", c="k", lw=0.9, label=f"random (k / {corpus:,})")
    ax.axhline(5, ls="--", c="gray", lw=0.8)
    ax.text(1, 5.3, "Exp 1.4 target Rank@10 5 %", fontsize=7, color="gray")
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("test Rank@k (%)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    _save(fig, path)
    plt.close(fig)
    return True


def _training_figure(plots_dir: Path, names: list[str], path: Path) -> bool:
    import pandas as pd

    files = {n: plots_dir / f"{n}.csv" for n in names}
    files = {n: p for n, p in files.items() if p.exists()}
    if not files:
        return False
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for n, p in files.items():
        df = pd.read_csv(p)
        a1.plot(df["epoch"], df["train_loss"], marker="o", ms=3, label=TITLES.get(n, n))
        a2.plot(df["epoch"], 100 * df["val_rank_at_10"], marker="o", ms=3, label=TITLES.get(n, n))
    a1.set_yscale("log")
    a1.set_xlabel("epoch")
    a1.set_ylabel("train loss (log; scales differ by loss)")
    a2.set_xlabel("epoch")
    a2.set_ylabel("val Rank@10 (%)")
    a2.legend(fontsize=8)
    for a in (a1, a2):
        a.grid(alpha=0.3)
    _save(fig, path)
    plt.close(fig)
    return True


def _bar_figure(metrics: dict[str, dict], names: list[str], path: Path) -> None:
    import numpy as np

    plt = _plt()
    ks = ["rank_at_1", "rank_at_5", "rank_at_10"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    x = np.arange(len(names))
    w = 0.26
    for j, k in enumerate(ks):
        ax.bar(x + (j - 1) * w, [100 * metrics[n].get(k, np.nan) for n in names], w,
               label=k.replace("rank_at_", "Rank@"))
    ax.axhline(5, ls="--", c="gray", lw=0.8, label="Exp 1.4 target Rank@10")
    ax.axhline(1, ls=":", c="gray", lw=0.8, label="Exp 1.4 target Rank@1")
    ax.set_xticks(x, [TITLES.get(n, n) for n in names], rotation=12, fontsize=8)
    ax.set_ylabel("test (%)")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def build_section(root: Path, figures_dir: Path, digits: int = 3) -> Section | None:
    """The code track's report section, or ``None`` when no code metrics exist yet."""
    root = Path(root)
    mdir = root / "reports" / "metrics" / "code"
    metrics = {f.stem: json.loads(f.read_text()) for f in sorted(mdir.glob("*.json"))}
    TITLES.clear()
    TITLES.update(variant_titles(root, "code", list(metrics)))
    if not metrics:
        return None
    names = _order(metrics)
    rows = []
    for n in names:
        m = metrics[n]
        r10 = m.get("rank_at_10", float("nan"))
        rows.append([
            TITLES.get(n, n),
            f"{100 * m.get('rank_at_1', float('nan')):.2f}",
            f"{100 * m.get('rank_at_5', float('nan')):.2f}",
            f"{100 * r10:.2f}",
            f"{m.get('mrr', float('nan')):.{digits}f}",
            f"{m.get('median_rank', float('nan')):.0f}",
            f"{m.get('mean_cosine', float('nan')):.{digits}f}",
            f"{int(m.get('corpus_size', 0)):,}",
            int(m.get("best_epoch", 0)),
            f"{wall_time(root, 'code', n, m):.1f}",
            f"{100 * (r10 - TARGET_R10):+.2f}",
        ])
    for name, r1, r10, corpus, delta in REFERENCES:
        rows.append([f"*{name}*", r1, "-", r10, "-", "-", "0.585 (val)" if "1.3" in name else "-",
                     f"{corpus:,}", "-", "-", "-" if delta is None else f"{delta:+.2f}"])
    n_q = max(int(m.get("n_queries", 0)) for m in metrics.values())
    table = Table(
        "Signature -> body retrieval: test signatures against all extracted bodies",
        ["variant", "R@1 %", "R@5 %", "R@10 %", "MRR", "median rank", "mean cos",
         "corpus", "best epoch", "train s", "Δ R@10 vs 5 % target (pp)"],
        rows,
        note=(f"{n_q} test signatures from held-out repositories, ranked against every "
              "extracted body (train + val + test; FAISS inner product on L2-normalised "
              "vectors). Rank@k: share of queries whose own body is in the top k. One run "
              "per variant. Italic rows are the retrieval experiment notes' numbers (docs/sources.md): Exp 1.3 as reported (its "
              "mean cosine 0.585 is on validation) and Exp 1.4's targets; they use "
              "Qwen2.5-Coder-3B layer 18 and a 49,631-function corpus, so absolute values are "
              "not comparable with this corpus size; the ordering of the losses is."),
    )
    s = Section("code", "Code retrieval: signature -> body embedding")
    s.tables.append(table)
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    p = figures_dir / "code_rank_at_k.png"
    corpus = max(int(m.get("corpus_size", 0)) for m in metrics.values())
    if _rank_curve_figure(root / "reports" / "data" / "code", names, p, corpus):
        s.figures.append(Figure("Test Rank@k against k", p,
                                "Share of test signatures whose body is in the top k."))
    p = figures_dir / "code_training_curves.png"
    if _training_figure(root / "reports" / "plots" / "code", names, p):
        s.figures.append(Figure("Training curves", p,
                                "Left: training loss per epoch; right: validation Rank@10 "
                                "against the full corpus (early-stopping criterion)."))
    p = figures_dir / "code_rank_bars.png"
    _bar_figure(metrics, names, p)
    s.figures.append(Figure("Test Rank@1/5/10 by loss", p,
                            "One run per loss (no error bars); dashed lines: Exp 1.4 targets."))
    return s
