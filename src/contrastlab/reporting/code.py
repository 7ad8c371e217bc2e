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

from ..errors import UnknownNameError
from ..losses.registry import method_row, role, track_variants
from . import Cell, Figure, Section, Table, style

__all__ = ["build_section", "REFERENCES", "TITLES"]

#: The untrained baselines: the code rows of the variant table of kind ``baseline``.
_ROWS = {n: v for n, v in track_variants("code").items() if v.kind == "baseline"}
TITLES = {n: v.title for n, v in _ROWS.items()}
BASELINES = list(_ROWS)
#: Short labels of the baselines (figure, headline; the report's legend spells them out).
SHORT = {n: v.short for n, v in _ROWS.items()}
REFERENCE_BASELINE = role("code", "reference_baseline")  # the dashed line of the Rank@k figure
#: The lexical baseline (BM25) the hybrids fuse with, and the untrained sentence embedding.
BM25, SENTENCE = method_row("code", "lexical"), method_row("code", "sentence_embedding")
#: ``<prefix><L>``: the centred zero-shot baseline with the teacher read at layer ``L``.
_LAYER_PREFIX = f"{method_row('code', 'zero_shot_centred')}_l"


def _is_baseline(name: str) -> bool:
    return name in BASELINES or name.startswith(_LAYER_PREFIX)


def _is_hybrid(name: str) -> bool:
    return name.startswith(("rrf_", "fusion_"))


def _untrained(name: str) -> bool:
    """A baseline, or a BM25 hybrid of a baseline (one deterministic run, no seeds)."""
    return _is_baseline(name) or (_is_hybrid(name) and _is_baseline(name.split("_", 1)[1]))


#: BM25 score-fused with the untrained sentence embedding: the control of the trained fusions.
CONTROL_HYBRID = f"fusion_{SENTENCE}"


def _trained_fusions(names) -> list[str]:
    """The score fusions of ``names`` other than the control (tested against it)."""
    return [n for n in names if n.startswith("fusion_") and n != CONTROL_HYBRID]

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
    if m.get("title") and not _is_hybrid(name):  # a row that declares its title (bi-encoder rows)
        return m["title"]
    if name.startswith(_LAYER_PREFIX):
        return f"zero-shot teacher, centred, layer {name.rsplit('_l', 1)[1]} (baseline)"
    if _is_hybrid(name):
        what = ("baseline" if _is_baseline(m.get("variant", "")) else "fine-tuned encoder"
                if (m.get("_variant_metrics") or {}).get("trainer") else "predictor")
        kind = (f"BM25 + {what}, reciprocal-rank fusion" if name.startswith("rrf_") else
                f"BM25 + {what}, score fusion (w={m.get('weight', float('nan')):g})")
        return f"{kind}: {_title(m.get('variant', name.split('_', 1)[1]), m.get('_variant_metrics'))}"
    loss = m.get("loss")
    try:
        from ..losses import get_spec

        base = get_spec(loss).title if loss else name
    except UnknownNameError:  # a loss no longer registered keeps its key
        base = name
    start = "from the zero-shot map" if m.get("residual") else "from scratch"
    return f"{base}, {start}" if loss else name


def _short(name: str, m: dict | None) -> str:
    """Short row label (figure, headline): a baseline's :data:`SHORT`; a trained row's loss
    short label (:func:`contrastlab.reporting.short_label`) with ``(zs)`` (from the zero-shot map) or ``(scratch)``; a hybrid
    ``BM25 ⊕ <row>`` (score fusion) or ``RRF(BM25, <row>)``."""
    m = m or {}
    if name in SHORT:
        return SHORT[name]
    if name.startswith(_LAYER_PREFIX):
        return f"zero-shot centred L{name.rsplit('_l', 1)[1]}"
    if _is_hybrid(name):
        inner = _short(m.get("variant", name.split("_", 1)[1]), m.get("_variant_metrics"))
        return f"RRF(BM25, {inner})" if name.startswith("rrf_") else f"BM25 ⊕ {inner}"
    loss = m.get("loss")
    if not loss:
        return name
    from . import short_label

    if m.get("trainer"):  # a fine-tuned bi-encoder row (contrastlab.biencoder)
        return ("Bi-enc ST (MNRL)" if m["trainer"] == "sentence_transformers"
                else f"Bi-enc {short_label('code', loss)}")
    return f"{short_label('code', loss)} ({'zs' if m.get('residual') else 'scratch'})"


def _comparison(stats: dict, metrics: dict, names: list[str], baseline: str | None):
    """The table's Rank@10 as the report's first figure and headline (:mod:`.figures`)."""
    from .figures import Comparison, Panel, rows_from_stats

    rows = rows_from_stats(
        stats["rank_at_10"]["best"], names,
        kind=lambda n: "baseline" if _is_baseline(n) else "hybrid" if _is_hybrid(n) else "loss",
        short=lambda n: _short(n, metrics.get(n)), title=lambda n: _title(n, metrics.get(n)),
        baseline=baseline)
    return Comparison("test Rank@10", [Panel("", rows)],
                      title="Signature -> body retrieval: test Rank@10, 95 % CI")


def _contrastive(loss: str | None) -> bool:
    """The loss has in-batch negatives and a temperature (registry ``needs == "targets"``)."""
    try:
        from ..losses import get_spec

        return bool(loss) and get_spec(loss).needs == "targets"
    except UnknownNameError:  # a loss no longer registered
        return False


def _order(metrics: dict) -> list[str]:
    """Baselines, residual rows, rows trained from scratch, then the BM25 hybrids."""
    base = [n for n in TITLES if n in metrics] + sorted(
        n for n in metrics if _is_baseline(n) and n not in TITLES)
    trained = [n for n in metrics if not _is_baseline(n) and not _is_hybrid(n)]
    hybrids = [n for n in metrics if _is_hybrid(n)]
    return (base + [n for n in trained if metrics[n].get("residual")]
            + [n for n in trained if not metrics[n].get("residual")]
            + sorted(hybrids, key=lambda n: (n.split("_", 1)[1], n)))


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
        if f.stem == "baselines" or f.stem.startswith("hybrids") or not (ddir / f"{f.stem}_ranks.csv").exists():
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
    # hybrids.json (hybrid_code) and hybrids_<x>.json (e.g. hybrid_biencoder); the seed
    # corpus's hybrid ranks are kept gzipped (6.7 MB as plain CSV)
    for hfile in sorted(mdir.glob("hybrids*.json")):
        hranks = next((p for p in (ddir / f"{hfile.stem}_ranks.csv", ddir / f"{hfile.stem}_ranks.csv.gz")
                       if p.exists()), None)
        if hranks is None or order is None:
            continue
        h = json.loads(hfile.read_text())
        hr = pd.read_csv(hranks)
        for k, m in h["hybrids"].items():
            part = hr[hr["hybrid"] == k].sort_values(["seed", "id"])
            seeds = sorted(part["seed"].unique())
            if not seeds:
                continue
            mat = np.stack([part[part["seed"] == s]["rank"].to_numpy() for s in seeds])
            ids = part[part["seed"] == seeds[0]]["id"].to_numpy()
            if len(ids) != len(order) or (ids != order).any():
                continue
            metrics[k] = {**m, "corpus_size": h["corpus_size"],
                          "_variant_metrics": metrics.get(m.get("variant"))}
            ranks[k] = mat
    if not metrics:
        return None
    return {"metrics": metrics, "ranks": ranks, "repo": repo}


def strongest_baseline(metrics: dict) -> str | None:
    """The baseline row with the best validation Rank@10 (``val_rank_at_10``; ties: name order)."""
    cands = [n for n in metrics if _is_baseline(n) and "val_rank_at_10" in metrics[n]]
    if not cands:
        return None
    return max(sorted(cands), key=lambda n: metrics[n]["val_rank_at_10"])


def only_in_top10(ranks: dict, a: str, b: str, k: int = 10) -> float:
    """Mean over seeds of #test queries whose true body ``a`` ranks in its top ``k`` and
    ``b`` does not (seeds matched by position; a one-seed row, a baseline, is repeated).

    ``ranks``: name -> int ``[S, I]``. Returns a float (a count averaged over seeds)."""
    import numpy as np

    ra, rb = ranks[a], ranks[b]
    n = max(len(ra), len(rb))
    return float(np.mean([((ra[min(i, len(ra) - 1)] <= k) & (rb[min(i, len(rb) - 1)] > k)).sum()
                          for i in range(n)]))


def table_stats(ranks: dict, repo, n_resamples: int | None = None, seed: int = 0,
                baseline: str | None = None) -> dict[str, dict]:
    """CIs, best-row statistics and paired tests for Rank@1/5/10 and MRR from per-query ranks.

    Args:
        ranks: row name -> int ``[S_row, I]`` ranks (one-seed rows, the baselines, are
            repeated over the seeds; multi-seed rows are cut to the smallest seed count).
        repo: ``[I]`` bootstrap clusters (repository groups of the test queries).
        baseline: the strongest baseline (chosen on validation by the caller); every row is
            tested against it.
        n_resamples: bootstrap draws; default :func:`contrastlab.evaluation.stats.draws_for`
            of the largest family (every row but one against the strongest baseline), so the
            smallest attainable Holm p is at most alpha / 10.

    Returns:
        metric -> ``{"best": summarize(...), "baseline": ..., "bm25": ...}``
        (:func:`contrastlab.evaluation.stats.summarize` with ``candidates`` = every row,
        baselines included: ``p_best``, ``in_mcs`` (95 % Model Confidence Set, Hansen, Lunde
        & Nason 2011), ``beats_baseline`` / ``below_baseline`` (Holm); ``"bm25"``: each BM25
        hybrid against the BM25 row, Holm over the hybrids only).
    """
    import numpy as np

    from ..evaluation.stats import bootstrap_per_item, draws_for, resample_counts, summarize

    # untrained rows (baselines and their hybrids) have one deterministic run: repeated per seed
    multi = [k for k, v in ranks.items() if v.shape[0] > 1 or not _untrained(k)]
    s = min([ranks[k].shape[0] for k in multi], default=1)
    mats = {k: (np.repeat(v[:1], s, 0) if v.shape[0] == 1 else v[:s]).astype(np.float64)
            for k, v in ranks.items()}
    n_items = next(iter(mats.values())).shape[1]
    n_resamples = n_resamples or draws_for(max(1, len(ranks) - 1))
    draws = resample_counts(s, n_items, clusters=repo, n_resamples=n_resamples, seed=seed)
    per_metric = {"rank_at_1": lambda r: (r <= 1), "rank_at_5": lambda r: (r <= 5),
                  "rank_at_10": lambda r: (r <= 10), "mrr": lambda r: 1.0 / r}
    names = list(ranks)
    out = {}
    for metric, f in per_metric.items():
        point, reps = bootstrap_per_item({k: f(v) for k, v in mats.items()}, draws=draws)
        base = baseline if baseline in point and len(point) > 1 else None
        res = {"best": summarize(point, reps, candidates=names, baseline=base)}
        if base is not None:
            res["baseline"] = res["best"]
        hyb = [n for n in names if _is_hybrid(n)]
        if BM25 in point and hyb:  # Holm family: the hybrids, each against BM25 alone
            res[BM25] = summarize(point, reps, candidates=hyb + [BM25], baseline=BM25)
        trained_hyb = _trained_fusions(hyb)
        if CONTROL_HYBRID in point and trained_hyb:  # each trained fusion vs the untrained one
            res["control"] = summarize(point, reps, candidates=trained_hyb + [CONTROL_HYBRID],
                                       baseline=CONTROL_HYBRID)
        out[metric] = res
    return out


def _resolution(stats: dict) -> str:
    """Draws, family size and floor of a :func:`table_stats` result, for its caption."""
    from ..evaluation.stats import resolution_note

    rows = stats["rank_at_10"]["best"]
    tested = [e for e in rows.values() if "test" in e]
    n_res = next(iter(rows.values()))["n_resamples"]
    if not tested:
        return f"{n_res:,} bootstrap draws"
    return resolution_note(n_res, tested[0]["family_size"], tested[0]["test"])


def _ci(st: dict, pct: bool, digits: int) -> Cell:
    """mean [95 % CI] (in % with one decimal for a Rank@k, else ``digits`` decimals)."""
    return Cell(st["mean"], st["ci_low"], st["ci_high"], scale=100.0 if pct else 1.0,
                digits=1 if pct else digits,
                source="mean over seeds, bootstrap CI over seeds and repository-clustered queries")


def _headline(stats: dict, metrics: dict, names: list[str], n_q: int, n_groups: int,
              corpus: int, ranks: dict | None = None, baseline: str | None = None) -> str:
    T = {n: _title(n, metrics.get(n)) for n in names}
    r10 = stats["rank_at_10"]["best"]
    best = next(n for n in names if r10[n].get("is_best"))
    tied = [n for n in names if r10[n].get("in_mcs") and n != best]
    trained = [n for n in names if not _is_baseline(n) and not _is_hybrid(n)]
    hybrids = [n for n in names if _is_hybrid(n)]
    parts = [f"On {n_q:,} test signatures from {n_groups} held-out repository groups, ranked "
             f"against {corpus:,} bodies (chance Rank@10 {1000 / corpus:.2f} %), the best row is "
             f"{T[best]} with Rank@10 {_ci(r10[best], True, 1)} % "
             f"(P(best) {r10[best].get('p_best', float('nan')):.2f})"
             + (f"; the 95 % model confidence set also holds {', '.join(T[t] for t in tied)}."
                if tied else "; the 95 % model confidence set holds it alone.")]
    if _is_baseline(best):
        parts.append(f"A baseline wins: {T[best]}.")
    if trained:
        tb = max(trained, key=lambda n: metrics[n].get("val_rank_at_10", float("-inf")))
        cmp = []
        for ref in (BM25, SENTENCE):
            if ref in r10:
                d = r10[tb]["mean"] - r10[ref]["mean"]
                cmp.append(f"{T[ref]} {_ci(r10[ref], True, 1)} % ({100 * d:+.1f} points)")
        parts.append(f"The best trained predictor on validation, {T[tb]}, reaches "
                     f"{_ci(r10[tb], True, 1)} %" + (" against " + "; ".join(cmp) if cmp else "")
                     + ".")
        if baseline and baseline in r10:
            above = [T[n] for n in trained if r10[n].get("beats_baseline")]
            below = [T[n] for n in trained if r10[n].get("below_baseline")]
            parts.append(f"Against the strongest baseline on validation ({T[baseline]}): "
                         f"significantly above (Holm): {', '.join(above) or 'none'}; "
                         f"significantly below: {', '.join(below) or 'none'}.")
    if hybrids and BM25 in stats["rank_at_10"]:
        hb = stats["rank_at_10"][BM25]
        hbest = max(hybrids, key=lambda n: r10[n]["mean"])
        sig = [n for n in hybrids if hb[n].get("beats_baseline")]
        parts.append(f"Best BM25 hybrid: {T[hbest]}, Rank@10 {_ci(r10[hbest], True, 1)} % "
                     f"({100 * hb[hbest]['delta_vs_baseline']:+.1f} points over BM25 alone, "
                     f"Holm p={hb[hbest]['p_vs_baseline_holm']:.3f}); hybrids significantly "
                     f"above BM25: {len(sig)} of {len(hybrids)}.")
        ctl = stats["rank_at_10"].get("control")
        if ctl:
            fused = _trained_fusions(hybrids)
            tbest = max(fused, key=lambda n: r10[n]["mean"])
            above = [n for n in fused if ctl[n].get("beats_baseline")]
            below = [n for n in fused if ctl[n].get("below_baseline")]
            parts.append(f"The control, BM25 score-fused with the untrained sentence embedding, "
                         f"reaches {_ci(r10[CONTROL_HYBRID], True, 1)} %; the best fusion with a "
                         f"trained predictor, {T[tbest]}, differs by "
                         f"{100 * ctl[tbest]['delta_vs_baseline']:+.1f} points (Holm "
                         f"p={ctl[tbest]['p_vs_baseline_holm']:.3f}); trained fusions "
                         f"significantly above the control: {len(above)} of {len(fused)}, below: "
                         f"{len(below)}.")
    if ranks is not None and trained and BM25 in ranks:
        tb = max(trained, key=lambda n: metrics[n].get("val_rank_at_10", float("-inf")))
        only_p = only_in_top10(ranks, tb, BM25)
        only_b = only_in_top10(ranks, BM25, tb)
        parts.append(f"{T[tb]} puts {only_p:.0f} test signatures' bodies in its top 10 that BM25 "
                     f"does not (mean over seeds); BM25 does so for {only_b:.0f} that it misses.")
    return " ".join(parts)


def _table(name: str, loaded: dict, title: str, digits: int, references: bool) -> tuple[Table, str]:
    import numpy as np

    metrics, ranks, repo = loaded["metrics"], loaded["ranks"], loaded["repo"]
    names = _order(metrics)
    baseline = strongest_baseline(metrics)
    stats = table_stats({n: ranks[n] for n in names}, repo, baseline=baseline)
    corpus = int(max(m.get("corpus_size", 0) for m in metrics.values()))
    n_q = int(ranks[names[0]].shape[1])
    n_groups = int(len(np.unique(repo)))
    rows = []
    for n in names:
        m = metrics[n]
        b = {k: stats[k]["best"][n] for k in stats}
        r10 = b["rank_at_10"]
        if _is_baseline(n):
            hp = (f"λ={m['lambda']:g}" if "lambda" in m else
                  f"k1={m['k1']:g}, b={m['b']:g}" if "k1" in m else
                  f"{m['max_tokens']} tokens" if "max_tokens" in m else "-")
            seeds, epoch = "-", "-"
        elif _is_hybrid(n):
            hp = (f"k={m.get('rrf_k', 60):g}" if n.startswith("rrf_") else f"w={m.get('weight'):g} (val)")
            seeds, epoch = str(m.get("n_seeds", "-")), "-"
        else:
            hp = (f"lr={m.get('lr', float('nan')):.2g}"
                  + (f", τ0={m['temperature']:.3g}" if _contrastive(m.get("loss")) else "")
                  + (" (tuned)" if m.get("tuned") else ""))
            seeds, epoch = str(m.get("n_seeds", "-")), (f"{m['steps']} steps" if "steps" in m else
                                                         f"{m.get('best_epoch', float('nan')):.1f}")
        if n == baseline or "delta_vs_baseline" not in r10:
            vs_base = "-" if n != baseline else "(strongest baseline)"
        else:
            mark = "▲ " if r10.get("beats_baseline") else "▼ " if r10.get("below_baseline") else ""
            vs_base = f"{mark}{100 * r10['delta_vs_baseline']:+.1f} (p={r10['p_vs_baseline_holm']:.3f})"
        rows.append([
            _title(n, m), _ci(b["rank_at_1"], True, digits), _ci(b["rank_at_5"], True, digits),
            _ci(r10, True, digits), _ci(b["mrr"], False, digits),
            f"{m.get('median_rank', float('nan')):.0f}", seeds, epoch, hp,
            f"{r10.get('p_best', float('nan')):.2f}", "yes" if r10.get("in_mcs") else "no",
            vs_base,
        ])
    if references:
        for rname, r1, r10s, rc, _ in REFERENCES:
            rows.append([f"*{rname}*", r1, "-", r10s, "-", "-", "-", "-", "-", "-", "-", "-"])
    note = (f"{n_q:,} test signatures from {n_groups} held-out repository groups against all "
            f"{corpus:,} extracted bodies (chance Rank@10 = 10/{corpus:,} = {1000 / corpus:.2f} %). "
            "Target space centred on the training bodies' mean for every learned or zero-shot "
            "row except the raw zero-shot one; BM25 scores identifier sub-tokens (snake_case and "
            "camelCase split, lower-cased, the whole identifier kept too; ties count against the "
            "true body); the sentence-embedding row is the teacher as its authors use it (all "
            "layers, mean pooling, normalised, raw space). Cells: mean [95 % CI], bias-corrected "
            "(BC) percentile CI (Efron & Tibshirani 1993, Sec. 14.3) from the bootstrap over seeds "
            "and over test queries clustered by repository group (related distributions form one group; near-duplicate bodies never "
            "straddle the split). P(best): share of draws in which the row has the highest "
            "Rank@10; in MCS: member of the 95 % model confidence set (Hansen, Lunde & Nason 2011) "
            "over every row, baselines included. 'vs strongest baseline': Rank@10 difference in "
            "points to the baseline with the best validation Rank@10"
            + (f" ({_title(baseline, metrics.get(baseline))})" if baseline else "")
            + ", Holm-corrected paired-bootstrap p; ▲/▼ significantly above/below ("
            + _resolution(stats) + "). Trained rows: "
            "mean over seeds; 'from the zero-shot map': the predictor adds a correction to the "
            "centred zero-shot map and epoch 0 (the map itself) may be kept by early stopping. "
            + ("Hybrids: BM25 fused with each trained predictor per seed, by reciprocal-rank "
               "fusion (Cormack et al. 2009, k=60) or by z-scored score fusion with its weight "
               "chosen on validation. Every grid (ridge λ, BM25 k1 and b, fusion weight) was "
               "searched on the validation repositories only. "
               if any(_is_hybrid(n) for n in names) else
               "No BM25 hybrid rows here (not computed for this table). Every grid (ridge λ, "
               "BM25 k1 and b) was searched on the validation repositories only. ")
            + ("Hyperparameters marked (tuned) were chosen on the validation repositories "
               "with an equal budget per loss (tune_code)."
               if any(m.get("tuned") for m in metrics.values()) else
               "No trained row of this table is tuned: every loss uses the hyperparameters shown."))
    if references:
        note += (" Italic rows: the retrieval notes' (docs/sources.md) reported numbers (Qwen2.5-Coder-3B layer 18, corpus "
                 "49,631), comparable in corpus size only.")
    table = Table(title, ["row", "R@1 % [CI]", "R@5 % [CI]", "R@10 % [CI]", "MRR [CI]",
                          "median rank", "seeds", "best epoch", "hyperparameters", "P(best)",
                          "in MCS", "Δ R@10 vs strongest baseline (pp, Holm p)"], rows, note=note)
    table.comparison = _comparison(stats, metrics, names, baseline)
    return table, _headline(stats, metrics, names, n_q, n_groups, corpus, ranks, baseline)


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


def default_vs_tuned(root: Path, loaded: dict, n_resamples: int | None = None) -> Table | None:
    """Each tuned loss's declared configuration (``default_code@<v>``: trial 0 of its study,
    run on the final seeds) against its tuned choice (``train_code@<v>``): validation and test
    Rank@10 side by side, test CIs and the paired difference from one bootstrap over seeds and
    repository-clustered queries, Holm over the losses. ``None`` before ``default_code`` ran."""
    import numpy as np
    import pandas as pd

    from ..evaluation.stats import (bootstrap_per_item, choose_test, draws_for, holm, paired_pvalue,
                                    resample_counts, resolution_note, summarize)

    mdir = root / "reports" / "metrics" / "code" / "default"
    ddir = root / "reports" / "data" / "code" / "default"
    mats, vals = {}, {}
    for f in sorted(mdir.glob("*.json")):
        m, v = json.loads(f.read_text()), f.stem
        if not m.get("searched") or v not in loaded["ranks"] or not (ddir / f"{v}_ranks.csv").exists():
            continue
        r = pd.read_csv(ddir / f"{v}_ranks.csv").sort_values(["seed", "id"])
        mat = np.stack([r[r["seed"] == s]["rank"].to_numpy() for s in sorted(r["seed"].unique())])
        if mat.shape[1] != loaded["ranks"][v].shape[1]:
            continue  # evaluated on another split
        mats[f"{v}|default"], mats[f"{v}|tuned"] = mat, loaded["ranks"][v]
        vals[v] = (m["val_rank_at_10"], loaded["metrics"][v].get("val_rank_at_10"))
    if not mats:
        return None
    s = min(x.shape[0] for x in mats.values())
    names = list(vals)
    n_resamples = n_resamples or draws_for(len(names))
    test = choose_test(n_resamples, len(names))
    draws = resample_counts(s, next(iter(mats.values())).shape[1], clusters=loaded["repo"],
                            n_resamples=n_resamples, seed=0)
    point, reps = bootstrap_per_item({k: (x[:s] <= 10).astype(np.float64) for k, x in mats.items()},
                                     draws=draws)
    st = summarize(point, reps)
    p = holm([paired_pvalue(reps[f"{v}|tuned"] - reps[f"{v}|default"],
                            point=point[f"{v}|tuned"] - point[f"{v}|default"], method=test)
              for v in names])
    rows = []
    for v, ph in zip(names, p):
        d, t = st[f"{v}|default"], st[f"{v}|tuned"]
        src = "test Rank@10, bootstrap over seeds and repository-clustered queries"
        diff = point[f"{v}|tuned"] - point[f"{v}|default"]
        rows.append([_title(v, loaded["metrics"][v]), f"{100 * vals[v][0]:.1f}",
                     Cell(d["mean"], d["ci_low"], d["ci_high"], scale=100, digits=1, source=src),
                     f"{100 * vals[v][1]:.1f}" if vals[v][1] is not None else "-",
                     Cell(t["mean"], t["ci_low"], t["ci_high"], scale=100, digits=1, source=src),
                     f"{100 * diff:+.1f} (p={ph:.2g})"])
    return Table("Default vs tuned: each loss's declared configuration and its tuned choice",
                 ["loss", "default val R@10 %", "default test R@10 % [CI]", "tuned val R@10 %",
                  "tuned test R@10 % [CI]", "Δ test (tuned − default, Holm p)"], rows,
                 note="Default: code.variants.<loss> as declared (lr 1e-3, τ0 0.07; trial 0 of its "
                      "study), trained on the final seeds by default_code; tuned: the study's choice "
                      "(train_code). Validation: mean over seeds of the best validation Rank@10 "
                      "(the early-stopping epoch); test: 1,477 signatures against all bodies, 95 % "
                      "CI (BC percentile) and paired p from the bootstrap over seeds and queries "
                      "clustered by repository group (" + resolution_note(n_resamples, len(names), test)
                      + "). The from-scratch ablations are not tuned and have no row.")


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
    s.comparison = table.comparison
    dvt = default_vs_tuned(root, loaded)
    if dvt is not None:
        s.tables.append(dvt)
    seed = _load_table(root, "code_seed_corpus")
    if seed is not None:
        t2, h2 = _table("code_seed_corpus", seed, "Seed-corpus preset (bash scripts/"
                        "seed_corpus.sh; presets/code-seed-corpus.yaml)", digits, True)
        t2.note += " " + _preset_provenance(root, "seed-corpus")
        s.tables.append(t2)
        s.notes.append("Seed-corpus table: " + h2)
    names = [n for n in _order(loaded["metrics"])
             if not _is_baseline(n) and not _is_hybrid(n)]
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
