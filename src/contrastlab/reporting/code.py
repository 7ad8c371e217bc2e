"""Code retrieval track section of the comparison report.

Reads, per table (the default corpus ``reports/metrics/code`` and, when present, the
seed-corpus preset's ``reports/metrics/code_seed_corpus``): ``baselines.json`` and
``<variant>.json`` (``baselines_code`` / ``evaluate_code@<variant>``) and the per-query test
ranks ``reports/data/<dir>/{baselines,<variant>}_ranks.csv``, and builds:

- a table with the untrained baselines (zero-shot raw and centred, ridge) and every trained
  variant (mean over its seeds): test Rank@1/5/10 and MRR with 95 % confidence intervals
  from a bootstrap over seeds and over test queries clustered by repository group
  (``contrastlab.evaluation.stats``), each row tested against the best row and against the
  centred zero-shot baseline (paired bootstrap on shared draws, Holm within the table);
  chance Rank@10 (10 / corpus size) beside the corpus;
- the headline (``Section.headline``): whether any trained loss beats the zero-shot baseline;
- the retrieval notes' (docs/sources.md) reference rows (Exp 1.3 SmoothL1 Rank@1 0.03 %, Rank@10 0.24 %; Exp 1.4
  targets Rank@1 > 1 %, Rank@10 > 5 %, corpus 49,631) only in the seed-corpus table, the one
  whose corpus has that size;
- figures: Rank@k against k, training curves (validation Rank@10 per epoch, seed 0).
"""

from __future__ import annotations

import json
from pathlib import Path

from . import Figure, Section, Table, style

__all__ = ["build_section", "REFERENCES", "TITLES"]

TITLES = {"zeroshot_raw": "zero-shot teacher, raw (baseline)",
          "zeroshot_centred": "zero-shot teacher, centred (baseline)",
          "ridge": "ridge regression, closed form (baseline)"}
BASELINES = ["zeroshot_raw", "zeroshot_centred", "ridge"]
REFERENCE_BASELINE = "zeroshot_centred"

#: The retrieval notes' rows.
REFERENCES = [
    # (name, Rank@1 %, Rank@10 %, corpus, Rank@10 - 5 % target in points)
    ("Retrieval notes Exp 1.3 SmoothL1 (test, Qwen2.5-Coder-3B L18, reported)", "0.03", "0.24", 49631, -4.76),
    ("Retrieval notes Exp 1.4 target (test; a target, not a result)", "> 1", "> 5", 49631, None),
]
TARGET_R10 = 0.05


def _title(name: str, m: dict | None) -> str:
    """Row title: a baseline's, else the loss's registry title (``LossSpec.title``) and
    whether the predictor started at the zero-shot map (residual) or from scratch."""
    if name in TITLES:
        return TITLES[name]
    m = m or {}
    loss = m.get("loss")
    try:
        from ..losses import get_spec

        base = get_spec(loss).title if loss else name
    except Exception:  # noqa: BLE001 - a loss no longer registered keeps its key
        base = name
    start = "from the zero-shot map" if m.get("residual") else "from scratch"
    return f"{base}, {start}" if loss else name


def _contrastive(loss: str | None) -> bool:
    """The loss has in-batch negatives and a temperature (registry ``needs == "targets"``)."""
    try:
        from ..losses import get_spec

        return bool(loss) and get_spec(loss).needs == "targets"
    except Exception:  # noqa: BLE001
        return False


def _order(metrics: dict) -> list[str]:
    """Baselines, then residual rows, then rows trained from scratch (params order kept)."""
    trained = [n for n in metrics if n not in TITLES]
    return ([n for n in TITLES if n in metrics]
            + [n for n in trained if metrics[n].get("residual")]
            + [n for n in trained if not metrics[n].get("residual")])


def _save(fig, path: Path) -> None:
    style.save(fig, path)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@style.styled
def _rank_curve_figure(data_dir: Path, names: list[str], path: Path, corpus: int = 0,
                       titles: dict | None = None) -> bool:
    import pandas as pd

    curves = {n: data_dir / f"{n}_rank_curve.csv" for n in names}
    curves = {n: p for n, p in curves.items() if p.exists()}
    if not curves:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=style.figsize(4.2))
    for n, p in curves.items():
        df = pd.read_csv(p)
        ax.plot(df["k"], 100 * df["rank_at_k"], label=(titles or {}).get(n, n))
    import numpy as np

    base = data_dir / "baselines_ranks.csv"
    if base.exists():  # the centred zero-shot baseline, the row every loss is tested against
        br = pd.read_csv(base)
        r = br[br["baseline"] == REFERENCE_BASELINE]["rank"].to_numpy()
        if len(r):
            k = np.arange(1, 101)
            ax.plot(k, 100 * (r[:, None] <= k[None, :]).mean(0), ls="--", c="0.35", lw=1.4,
                    label=TITLES[REFERENCE_BASELINE])
    if corpus:
        k = np.arange(1, 101)
        ax.plot(k, 100 * k / corpus, ls=":", c="k", lw=0.9, label=f"random (k / {corpus:,})")
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("test Rank@k (%)")
    ax.legend()
    _save(fig, path)
    return True


@style.styled
def _training_figure(plots_dir: Path, names: list[str], path: Path,
                     titles: dict | None = None) -> bool:
    import pandas as pd

    files = {n: plots_dir / f"{n}.csv" for n in names}
    files = {n: p for n, p in files.items() if p.exists()}
    if not files:
        return False
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=style.figsize(3.8))
    for n, p in files.items():
        df = pd.read_csv(p)
        if "seed" in df:
            df = df[df["seed"] == df["seed"].min()]
        lab = (titles or {}).get(n, n)
        a1.plot(df["epoch"], df["train_loss"], marker="o", ms=3, label=lab)
        a2.plot(df["epoch"], 100 * df["val_rank_at_10"], marker="o", ms=3, label=lab)
    a1.set_yscale("symlog", linthresh=1e-3)
    a1.set_xlabel("epoch")
    a1.set_ylabel("train loss (log; scales differ by loss)")
    a2.set_xlabel("epoch")
    a2.set_ylabel("val Rank@10 (%)")
    # one legend under both panels: inside the right panel it covered the curves
    h, lab = a2.get_legend_handles_labels()
    fig.legend(h, lab, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)
    _save(fig, path)
    return True


def _load_table(root: Path, name: str) -> dict | None:
    """Metrics and per-query ranks of one table (``reports/metrics/<name>``)."""
    import numpy as np
    import pandas as pd

    mdir = root / "reports" / "metrics" / name
    ddir = root / "reports" / "data" / name
    bfile = mdir / "baselines.json"
    metrics: dict[str, dict] = {}
    ranks: dict[str, np.ndarray] = {}  # name -> [S, I]
    order = None
    repo = None
    if bfile.exists() and (ddir / "baselines_ranks.csv").exists():
        b = json.loads(bfile.read_text())
        br = pd.read_csv(ddir / "baselines_ranks.csv")
        for k, m in b["baselines"].items():
            part = br[br["baseline"] == k].sort_values("id")
            order = part["id"].to_numpy() if order is None else order
            repo = part["repo"].astype(str).to_numpy() if repo is None else repo
            metrics[k] = {**m, "corpus_size": b["corpus_size"], "n_seeds": 0}
            ranks[k] = part["rank"].to_numpy()[None, :]
    for f in sorted(mdir.glob("*.json")):
        if f.stem == "baselines" or not (ddir / f"{f.stem}_ranks.csv").exists():
            continue
        m = json.loads(f.read_text())
        r = pd.read_csv(ddir / f"{f.stem}_ranks.csv").sort_values(["seed", "id"])
        seeds = sorted(r["seed"].unique())
        mat = np.stack([r[r["seed"] == s]["rank"].to_numpy() for s in seeds])
        ids = r[r["seed"] == seeds[0]]["id"].to_numpy()
        if order is None:
            order = ids
            repo = r[r["seed"] == seeds[0]]["repo"].astype(str).to_numpy()
        if len(ids) != len(order) or (ids != order).any():
            continue  # a stale file evaluated on another split
        metrics[f.stem] = m
        ranks[f.stem] = mat
    if not metrics:
        return None
    return {"metrics": metrics, "ranks": ranks, "repo": repo}


def table_stats(ranks: dict, repo, n_resamples: int = 1000, seed: int = 0) -> dict[str, dict]:
    """CIs and paired tests for Rank@1/5/10 and MRR from per-query ranks.

    Args:
        ranks: row name -> int ``[S_row, I]`` ranks (baselines have ``S_row = 1`` and are
            repeated over the seeds; trained rows are cut to the smallest seed count).
        repo: ``[I]`` bootstrap clusters (repository groups of the test queries).

    Returns:
        metric -> :func:`contrastlab.evaluation.stats.summarize` output twice:
        ``{"best": ..., "baseline": ...}`` (all rows as candidates for the best; every row
        against the centred zero-shot baseline when it is present).
    """
    import numpy as np

    from ..evaluation.stats import bootstrap_per_item, resample_indices, summarize

    trained = [k for k, v in ranks.items() if v.shape[0] > 1 or k not in BASELINES]
    s = min([ranks[k].shape[0] for k in trained], default=1)
    mats = {k: (np.repeat(v[:1], s, 0) if k in BASELINES else v[:s]).astype(np.float64)
            for k, v in ranks.items()}
    n_items = next(iter(mats.values())).shape[1]
    draws = resample_indices(s, n_items, clusters=repo, n_resamples=n_resamples, seed=seed)
    per_metric = {"rank_at_1": lambda r: (r <= 1), "rank_at_5": lambda r: (r <= 5),
                  "rank_at_10": lambda r: (r <= 10), "mrr": lambda r: 1.0 / r}
    out = {}
    for metric, f in per_metric.items():
        point, reps = bootstrap_per_item({k: f(v) for k, v in mats.items()}, draws=draws)
        res = {"best": summarize(point, reps)}
        base = REFERENCE_BASELINE if REFERENCE_BASELINE in point else None
        if base is not None and len(point) > 1:
            res["baseline"] = summarize(point, reps, baseline=base)
        out[metric] = res
    return out


def _ci(st: dict, pct: bool, digits: int) -> str:
    k = 100.0 if pct else 1.0
    d = 1 if pct else digits
    return f"{k * st['mean']:.{d}f} [{k * st['ci_low']:.{d}f}, {k * st['ci_high']:.{d}f}]"


def _headline(stats: dict, metrics: dict, names: list[str], n_q: int, n_groups: int,
              corpus: int) -> str:
    T = {n: _title(n, metrics.get(n)) for n in names}
    r10 = stats["rank_at_10"]
    best = next(n for n in names if r10["best"][n].get("is_best"))
    tied = [n for n in names if r10["best"][n].get("tied_for_best") and n != best]
    trained = [n for n in names if n not in BASELINES]
    parts = [f"On {n_q:,} test signatures from {n_groups} held-out repository groups, ranked "
             f"against {corpus:,} bodies (chance Rank@10 {1000 / corpus:.2f} %), the best row is "
             f"{T[best]} with Rank@10 {_ci(r10['best'][best], True, 1)} %"
             + (f", tied (Holm-corrected paired bootstrap) with "
                f"{', '.join(T[t] for t in tied)}." if tied else ", ahead of every "
                "other row (Holm-corrected paired bootstrap).")]
    if "baseline" in r10 and trained:
        zb = r10["best"][REFERENCE_BASELINE]
        winners = [n for n in trained if r10["baseline"][n].get("beats_baseline")]
        losers = [n for n in trained if r10["baseline"][n].get("delta_vs_baseline", 0) < 0
                  and r10["baseline"][n].get("p_vs_baseline_holm", 1) < 0.05]
        if winners:
            parts.append("Trained losses that beat the centred zero-shot baseline (Rank@10 "
                         f"{100 * zb['mean']:.1f} %): " + ", ".join(
                             f"{T[w]} ({100 * r10['baseline'][w]['delta_vs_baseline']:+.1f} "
                             "points)" for w in winners) + ".")
        else:
            parts.append("No trained loss beats the untrained centred zero-shot baseline "
                         f"(Rank@10 {100 * zb['mean']:.1f} %)"
                         + (f"; significantly below it: "
                            f"{', '.join(T[x] for x in losers)}." if losers else "."))
    return " ".join(parts)


def _table(name: str, loaded: dict, title: str, digits: int, references: bool) -> tuple[Table, str]:
    import numpy as np

    metrics, ranks, repo = loaded["metrics"], loaded["ranks"], loaded["repo"]
    names = _order(metrics)
    stats = table_stats({n: ranks[n] for n in names}, repo)
    corpus = int(max(m.get("corpus_size", 0) for m in metrics.values()))
    n_q = int(ranks[names[0]].shape[1])
    n_groups = int(len(np.unique(repo)))
    rows = []
    for n in names:
        m = metrics[n]
        b = {k: stats[k]["best"][n] for k in stats}
        vb = stats["rank_at_10"].get("baseline", {}).get(n, {})
        if n in BASELINES:
            hp = f"λ={m['lambda']:g}" if "lambda" in m else "-"
            seeds, epoch = "-", "-"
        else:
            hp = (f"lr={m.get('lr', float('nan')):.2g}"
                  + (f", τ0={m['temperature']:.3g}" if _contrastive(m.get("loss")) else "")
                  + (" (tuned)" if m.get("tuned") else ""))
            seeds, epoch = str(m.get("n_seeds", "-")), f"{m.get('best_epoch', float('nan')):.1f}"
        vs_base = ("-" if n == REFERENCE_BASELINE or not vb else
                   f"{100 * vb['delta_vs_baseline']:+.1f} (p={vb['p_vs_baseline_holm']:.3f})")
        rows.append([
            _title(n, m), _ci(b["rank_at_1"], True, digits), _ci(b["rank_at_5"], True, digits),
            _ci(b["rank_at_10"], True, digits), _ci(b["mrr"], False, digits),
            f"{m.get('median_rank', float('nan')):.0f}", seeds, epoch, hp, vs_base,
            "best" if b["rank_at_10"].get("is_best") else
            ("tied" if b["rank_at_10"].get("tied_for_best") else "worse"),
        ])
    if references:
        for rname, r1, r10, rc, _ in REFERENCES:
            rows.append([f"*{rname}*", r1, "-", r10, "-", "-", "-", "-", "-", "-", "-"])
    note = (f"{n_q:,} test signatures from {n_groups} held-out repository groups against all "
            f"{corpus:,} extracted bodies (chance Rank@10 = 10/{corpus:,} = {1000 / corpus:.2f} %). "
            "Target space centred on the training bodies' mean for every row except the raw "
            "zero-shot one. Cells: mean [95 % CI], CI from 1,000 bootstrap draws over seeds "
            "and over test queries clustered by repository group (related distributions "
            "form one group; near-duplicate bodies never straddle the split). 'vs zero-shot': Rank@10 difference to "
            "the centred zero-shot baseline in points, Holm-corrected paired-bootstrap p; "
            "last column: Rank@10 compared with the best row (tied = not significantly "
            "worse after Holm). Trained rows: mean over seeds; 'from the zero-shot map': the "
            "predictor adds a correction to the centred zero-shot map and epoch 0 (the map "
            "itself) may be kept by early stopping (best epoch 0). "
            + ("Hyperparameters marked (tuned) were chosen on the validation repositories "
               "with an equal budget per loss (tune_code)."
               if any(m.get("tuned") for m in metrics.values()) else
               "No row of this table is tuned: every loss uses the hyperparameters shown."))
    if references:
        note += (" Italic rows: the retrieval notes' (docs/sources.md) reported numbers (Qwen2.5-Coder-3B layer 18, corpus "
                 "49,631), comparable in corpus size only.")
    table = Table(title, ["row", "R@1 % [CI]", "R@5 % [CI]", "R@10 % [CI]", "MRR [CI]",
                          "median rank", "seeds", "best epoch", "hyperparameters",
                          "Δ R@10 vs zero-shot (pp, Holm p)", "vs best"], rows, note=note)
    return table, _headline(stats, metrics, names, n_q, n_groups, corpus)


def _preset_provenance(root: Path, name: str) -> str:
    """Provenance sentence of a table produced from ``presets/code-<name>.yaml``."""
    from ..params import params_hash
    from ..params.code import CodeParams

    path = Path(root) / "presets" / f"code-{name}.yaml"
    try:
        import yaml

        h = params_hash(CodeParams(**yaml.safe_load(path.read_text(encoding="utf-8"))["code"]))
    except Exception:  # noqa: BLE001 - a missing or edited preset: say so, do not fail
        h = "unavailable"
    return (f"Produced by `bash scripts/seed_corpus.sh` with `presets/code-{name}.yaml` "
            f"(params `code` hash `{h}`), not by params.yaml's `code` section.")


def build_section(root: Path, figures_dir: Path, digits: int = 3) -> Section | None:
    """The code track's report section, or ``None`` when no code metrics exist yet."""
    root = Path(root)
    loaded = _load_table(root, "code")
    if loaded is None:
        return None
    s = Section("code", "Code retrieval: signature -> body embedding")
    table, headline = _table("code", loaded, "Signature -> body retrieval, default corpus "
                             "(installed distributions, MiniLM layer 4)", digits, False)
    s.tables.append(table)
    s.headline = headline
    seed = _load_table(root, "code_seed_corpus")
    if seed is not None:
        t2, h2 = _table("code_seed_corpus", seed, "Seed-corpus preset (bash scripts/"
                        "seed_corpus.sh; presets/code-seed-corpus.yaml)", digits, True)
        t2.note += " " + _preset_provenance(root, "seed-corpus")
        s.tables.append(t2)
        s.notes.append("Seed-corpus table: " + h2)
    names = [n for n in _order(loaded["metrics"]) if n not in BASELINES]
    titles = {n: _title(n, loaded["metrics"][n]) for n in names}
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    p = figures_dir / "code_rank_at_k.png"
    corpus = max(int(m.get("corpus_size", 0)) for m in loaded["metrics"].values())
    if _rank_curve_figure(root / "reports" / "data" / "code", names, p, corpus, titles):
        s.figures.append(Figure("Test Rank@k against k", p,
                                "Share of test signatures whose body is in the top k (mean "
                                "over seeds); dotted: chance."))
    p = figures_dir / "code_training_curves.png"
    if _training_figure(root / "reports" / "plots" / "code", names, p, titles):
        s.figures.append(Figure("Training curves (seed 0)", p,
                                "Left: training loss per epoch; right: validation Rank@10 "
                                "against the full corpus (early-stopping criterion)."))
    return s
