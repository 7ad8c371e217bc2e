"""The fine-tuning comparison (stages ``finetune_evaluate``, ``finetune_summary``): clustered-bootstrap tables.

Per-query metrics come from ``finetune_encoder`` (:mod:`contrastlab.finetune.metrics`) and,
here, from the stored embeddings (within-problem tier metrics, :mod:`contrastlab.finetune.tiers`).
:func:`table` turns each method's ``[S, I]`` (seeds x queries) arrays into estimates and CIs:
:func:`contrastlab.evaluation.stats_crossed.bootstrap_per_item_crossed` (a cluster bootstrap
by problem, ``n - 1`` of ``n`` seeds and clusters, the seed x query interaction counted once,
Owen 2007) and :func:`~contrastlab.evaluation.stats.summarize` (BC percentile intervals, MCS,
Holm-corrected tests against the strongest baseline).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..errors import InputError
from .metrics import BASELINES, average_precision_rows, item_metrics, knn_purity  # noqa: F401

__all__ = ["item_metrics", "average_precision_rows", "table", "BASELINES",
           "summarize_variants", "summary", "purity_ceiling", "tier_arrays",
           "tier_summary", "nest", "row_embeddings", "one_token_pairs"]


def table(items: Mapping[str, np.ndarray], clusters, *, baseline: str | None,
          n_resamples: int = 1000, seed: int = 0, references: Sequence[str] = ()) -> dict[str, dict]:
    """One metric's table over methods: CIs clustered by problem.

    Args:
        items: method -> ``[S, I]`` per-query scores (methods with one seed are repeated to
            the common ``S``; NaN columns -- queries without a relevant row -- are dropped for
            every method alike).
        clusters: ``[I]`` problem id per query.
        baseline: the strongest baseline (tested against, see
            :func:`contrastlab.evaluation.stats.summarize`); every method but the
            ``references`` is a candidate (in the MCS and the Holm family).
        references: rows shown with their CI only (e.g. the data's ceiling).
        n_resamples: the fewest draws; at least :func:`~contrastlab.evaluation.stats.draws_for`
            of the family, doubled while a Holm decision is within Monte-Carlo error of alpha
            (``summarize(redraw=)``; the row's ``n_resamples`` says how many were drawn).

    Returns:
        :func:`~contrastlab.evaluation.stats.summarize` output plus ``n_items`` per method.

    Raises:
        InputError: methods of different query counts.
    """
    from ..evaluation.stats import draws_for, summarize
    from ..evaluation.stats_crossed import bootstrap_per_item_crossed

    arrs = {k: np.atleast_2d(np.asarray(v, dtype=np.float64)) for k, v in items.items()}
    s_max = max(a.shape[0] for a in arrs.values())
    n_items = {a.shape[1] for a in arrs.values()}
    if len(n_items) != 1:
        raise InputError(f"methods have different numbers of queries: {sorted(n_items)}")
    arrs = {k: (np.repeat(a, s_max, axis=0) if a.shape[0] == 1 else a) for k, a in arrs.items()}
    if len({a.shape[0] for a in arrs.values()}) != 1:
        raise InputError("methods have different numbers of seeds (and more than one)")
    keep = ~np.any([np.isnan(a).any(0) for a in arrs.values()], axis=0)
    arrs = {k: a[:, keep] for k, a in arrs.items()}
    cl = np.asarray(clusters, dtype=object)[keep].astype(str)
    # problems and seeds resampled (n-1 of n), the seed x query interaction counted once
    cands = [k for k in arrs if k not in set(references)]

    def redraw(r: int):
        return bootstrap_per_item_crossed(arrs, clusters=cl, n_resamples=r, seed=seed)

    out = summarize(*redraw(max(n_resamples, draws_for(len(cands) - 1))), baseline=baseline,
                    candidates=cands, redraw=redraw)
    for k in out:
        out[k]["n_items"] = int(keep.sum())
    return out


def purity_ceiling(problems, tiers, split, k: int) -> dict[str, np.ndarray]:
    """The highest kNN@k problem x tier purity any embedding can reach, per query.

    A query whose (problem, tier) cell has ``n`` members in the corpus can have at most
    ``min(k, n)`` of its ``k`` neighbours in the cell: ceiling ``min(k, n) / k``. With at most
    nine variants per HumanEval problem, most cells are small, so the ceiling is well below 1.

    Returns:
        ``{"a": [Q_a], "b": [Q_b], "val": [Q_val]}`` float64 (corpora as in
        :func:`item_metrics`).
    """
    keys = np.array([f"{a}|{b}" for a, b in zip(problems, tiers)], dtype=object)
    split = np.asarray(split, dtype=object)
    out = {}
    train = Counter(keys[split == "train"])
    for name, s in (("a", "test_a"), ("val", "val")):
        n = np.array([train.get(x, 0) for x in keys[split == s]], dtype=np.float64)
        out[name] = np.minimum(n, k) / k
    kb = keys[split == "test_b"]
    cnt = Counter(kb)
    out["b"] = np.minimum(np.array([cnt[x] - 1 for x in kb], dtype=np.float64), k) / k
    return out


def _items_file(metrics_dir, row: str):
    """``<metrics_dir>/items/<row>.npz``; InputError when missing."""
    f = Path(metrics_dir) / "items" / f"{row}.npz"
    if not f.exists():
        raise InputError(f"{f}: missing; run finetune_encoder@{row} first")
    return f


def summarize_variants(ft, df, metrics_dir) -> dict:
    """The track's comparison (stage ``finetune_summary``): every variant's and baseline's
    per-query arrays (``<metrics_dir>/items/<v>.npz``) turned into one :func:`table` per
    split (a: unseen submissions of seen problems; b: unseen problems) and metric, with the
    strongest baseline chosen on validation kNN problem x tier purity and the purity ceiling
    the data allows.

    Args:
        ft: the ``finetune`` params section. df: the variants table (``variants.parquet``:
            ``id``, ``problem``, ``tier``, ``split``). metrics_dir: ``reports/metrics/finetune``.

    Returns:
        ``{"baseline", "ceiling", "baseline_rule", "validation", "variants", "tables"}``
        (``tables[split][metric][row]``: mean, CI, MCS, tests; fractions).

    Raises:
        contrastlab.errors.InputError: a variant's arrays are missing.
    """
    names = [*ft.variants, *BASELINES]
    items = {}
    for v in names:
        with np.load(_items_file(metrics_dir, v)) as z:
            items[v] = {k: z[k] for k in z.files if k != "seeds"}
    kmax = max(ft.eval.knn_k)
    val_key = f"val/knn{kmax}_pxt"
    val = {v: float(np.mean(items[v][val_key])) for v in names}
    baseline = max(BASELINES, key=lambda b: val[b])
    split = df["split"].to_numpy()
    clusters = {"a": df.loc[split == "test_a", "problem"].astype(str).to_numpy(),
                "b": df.loc[split == "test_b", "problem"].astype(str).to_numpy()}
    ceil = purity_ceiling(df["problem"].astype(str), df["tier"].astype(str), split, kmax)
    out = {"baseline": baseline, "ceiling": {f"knn{kmax}_pxt": {s: float(c.mean()) for s, c in ceil.items()}},  # not a row name (metric)
           "baseline_rule": f"best validation kNN@{kmax} problem x tier purity",
           "validation": val, "variants": names, "tables": {}}
    for s in ("a", "b"):
        metrics = sorted({k.split("/", 1)[1] for k in items[names[0]] if k.startswith(f"{s}/")})
        out["tables"][s] = {}
        for m in metrics:
            out["tables"][s][m] = table({v: items[v][f"{s}/{m}"] for v in names}, clusters[s],
                                        baseline=baseline, n_resamples=ft.eval.n_resamples, seed=0)
    return out


def row_embeddings(ft, df, runs_dir, row: str):
    """One row's stored embeddings ``[S, N, D]`` float32 (``<runs_dir>/<row>/embeddings.
    safetensors``, written by ``finetune_encoder``). The TF-IDF row stores none (its folder
    is empty): its embeddings are recomputed, deterministically, with
    :func:`contrastlab.finetune.tfidf.tfidf_embeddings` (``[1, N, F]``).

    Raises:
        contrastlab.errors.InputError: the row's run folder is missing.
    """
    from safetensors.torch import load_file

    from .tfidf import tfidf_embeddings

    run = Path(runs_dir) / row
    if not run.is_dir():
        raise InputError(f"{run}: missing; run finetune_encoder@{row} first")
    f = run / "embeddings.safetensors"
    if f.exists():
        return load_file(str(f))["embeddings"]
    train = df["split"].astype(str).to_numpy() == "train"
    return tfidf_embeddings(df["text"].tolist(), train, ft.eval.tfidf_max_features)[None]


def one_token_pairs(df) -> dict:
    """Same-problem pairs of variants at most one code token apart
    (:func:`contrastlab.finetune.tiers.within_one_edit`) over the whole table: their number
    and the share that differ in tier."""
    from .tiers import code_tokens, within_one_edit

    n = diff = 0
    for _, g in df.groupby("problem", sort=True):
        toks = [code_tokens(t) for t in g["text"]]
        tiers = g["tier"].astype(str).tolist()
        for i in range(len(toks)):
            for j in range(i + 1, len(toks)):
                if within_one_edit(toks[i], toks[j]):
                    n += 1
                    diff += tiers[i] != tiers[j]
    return {"n": n, "differ_in_tier": diff / n if n else float("nan")}


def nest(flat: Mapping[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """``{"<row>/<split>/<metric>": a}`` (``tier_items.npz``) as ``{row: {"<split>/<metric>": a}}``."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for k, a in flat.items():
        row, key = k.split("/", 1)
        out.setdefault(row, {})[key] = a
    return out


def summary(ft, df, metrics_dir) -> dict:
    """``summary.json`` (stage ``finetune_summary``): :func:`summarize_variants` of
    ``<metrics_dir>/items/`` and, when ``<metrics_dir>/tier_items.npz`` exists (stage
    ``finetune_evaluate``), its :func:`tier_summary` under ``"tier"``. Needs no embeddings.

    Raises:
        contrastlab.errors.InputError: a row's arrays are missing.
    """
    out = summarize_variants(ft, df, metrics_dir)
    f = Path(metrics_dir) / "tier_items.npz"
    if f.exists():
        with np.load(f) as z:
            out["tier"] = tier_summary(ft, df, nest({k: z[k] for k in z.files}))
    return out


def tier_arrays(ft, df, runs_dir, metrics_dir) -> dict[str, np.ndarray]:
    """Per-query within-problem tier metrics of every row (``tier_items.npz``).

    ``wp_auc``, ``wp_nn_tier``, ``wp_pair_sep`` from each row's embeddings (every seed) on
    splits a, b and validation, plus the reference rows (from the labels alone) and the stored
    ``knn{k}_pxt`` (largest ``k``) as a secondary column.

    Args:
        ft: the ``finetune`` params section. df: the variants table (``problem``, ``tier``,
            ``split``, ``text``). runs_dir: ``data/finetune/runs``. metrics_dir:
            ``reports/metrics/finetune`` (``items/<row>.npz``).

    Returns:
        ``{"<row>/<split>/<metric>": [S, Q] float64}``, rows in the order variants,
        baselines, references.

    Raises:
        contrastlab.errors.InputError: a row's run folder or stored arrays are missing, or
            the recomputed TF-IDF embeddings do not reproduce its stored kNN arrays.
    """
    from .tiers import REFERENCES, reference_metrics, split_sets, tier_items

    problems = df["problem"].astype(str).to_numpy()
    tiers = df["tier"].astype(str).to_numpy()
    split = df["split"].astype(str).to_numpy()
    sets = split_sets(problems, tiers, split, df["text"].tolist())
    kmax = max(ft.eval.knn_k)
    knn = f"knn{kmax}_pxt"  # not a row name (metric)
    names = [*ft.variants, *BASELINES]
    items: dict[str, dict[str, np.ndarray]] = {}
    for v in names:
        f = _items_file(metrics_dir, v)
        with np.load(f) as z:
            stored = {s: z[f"{s}/{knn}"] for s in ("a", "b")}
        emb = row_embeddings(ft, df, runs_dir, v)
        per_seed = [tier_items(e, sets) for e in emb]
        items[v] = {f"{s}/{m}": np.stack([p[s][m] for p in per_seed]) for s in per_seed[0]
                    for m in per_seed[0][s]}
        if not (Path(runs_dir) / v / "embeddings.safetensors").exists():
            again = {s: knn_purity(emb[0][c], problems[c] + "|" + tiers[c], emb[0][q],
                                   problems[q] + "|" + tiers[q], kmax, exclude_self=s == "b")
                     for s, (q, c, _) in sets.items() if s in ("a", "b")}
            if not all(np.array_equal(again[s], stored[s][0]) for s in ("a", "b")):
                raise InputError(f"recomputed {v} embeddings do not reproduce {f}")
        items[v].update({f"{s}/{knn}": stored[s] for s in ("a", "b")})
    for s, (_, _, ps) in sets.items():
        for r, d in reference_metrics(ps, kmax).items():
            items.setdefault(r, {}).update({f"{s}/{m}": a[None] for m, a in d.items()})
    return {f"{r}/{k}": a for r in [*ft.variants, *BASELINES, *REFERENCES] for k, a in items[r].items()}


def tier_summary(ft, df, items: dict[str, dict[str, np.ndarray]]) -> dict:
    """The within-problem tier tables (stage ``finetune_summary``) from the per-query arrays
    ``items[row]["<split>/<metric>"]`` (``[S, Q]``; :func:`tier_arrays` as :func:`nest`
    groups it, what ``tier_items.npz`` stores, so no embeddings are needed). The strongest
    baseline: best validation ``wp_auc`` among the baselines and the tier-blind reference. At
    least ``draws_for(m)`` draws (``m`` paired tests), so the Holm floor ``p_floor`` <= 0.005.

    Returns:
        ``{"baseline", "baseline_rule", "validation", "rows", "references",
        "reference_titles", "chance", "ceiling", "pairs", "n_resamples", "p_floor",
        "tables": {split: {metric: {row: stats}}}}`` (``chance`` / ``ceiling``: the reference
        rows' names).
    """
    from ..evaluation.stats import draws_for
    from .tiers import CEILING, CHANCE, REFERENCES, TIER_METRICS, split_sets

    problems = df["problem"].astype(str).to_numpy()
    sets = split_sets(problems, df["tier"].astype(str).to_numpy(),
                      df["split"].astype(str).to_numpy(), df["text"].tolist())
    knn = f"knn{max(ft.eval.knn_k)}_pxt"  # not a row name (metric)
    rows = [*ft.variants, *BASELINES, *REFERENCES]
    val = {r: float(np.nanmean(items[r]["val/wp_auc"])) for r in rows if "val/wp_auc" in items[r]}
    pool = [*BASELINES, *(r for r, x in REFERENCES.items() if x.competes)]
    baseline = max(pool, key=lambda b: val.get(b, -1.0))
    clusters = {s: problems[q] for s, (q, _, _) in sets.items()}
    refs = [r for r, x in REFERENCES.items() if not x.competes]
    # at least draws_for(m) draws (Holm floor <= alpha / 10; table() adds more near alpha)
    n_tests = len(rows) - len(refs) - 1
    draws = max(ft.eval.n_resamples, draws_for(n_tests))
    out = {"baseline": baseline, "rows": rows, "references": list(REFERENCES),
           "reference_titles": {r: x.title for r, x in REFERENCES.items()},
           "chance": CHANCE, "ceiling": CEILING,
           "baseline_rule": "best validation within-problem same-tier AUC (baselines and the "
                            "tier-blind reference)",
           "validation": val, "pairs": one_token_pairs(df), "n_resamples": draws,
           "p_floor": n_tests * 2 / (draws + 1), "tables": {}}
    for s in ("a", "b"):  # a metric no query of the split defines is left out
        out["tables"][s] = {m: table({r: items[r][f"{s}/{m}"] for r in rows}, clusters[s],
                                     baseline=baseline, n_resamples=draws, seed=0,
                                     references=refs)
                            for m in (*TIER_METRICS, knn)
                            if np.isfinite(items[CHANCE][f"{s}/{m}"]).any()}
    return out
