"""Statistics of the graph section: paired tests on the per-node predictions
``reports/data/graph/<variant>_test_pred.csv`` of the variants, the feature baselines (the
variant table's graph baselines but the supervised references) and the supervised references.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..evaluation.stats import (bootstrap_per_item, draws_for, holm, paired_pvalue, settle_draws,
                                summarize, table_resolution)
from ..io import read_json
from ..losses.registry import track_variants
from . import Inputs

_ROWS = {n: v for n, v in track_variants("graph").items() if v.kind == "baseline" and v.method != "supervised"}
#: ``{baseline: row label}`` of the feature baselines (raw features, SGC, untrained GCN).
BASELINES = {n: v.title for n, v in _ROWS.items()}
SHORT_BASELINES = {n: v.short for n, v in _ROWS.items()}
#: Deterministic baselines (one probe run, repeated across seeds for the paired tests).
_DETERMINISTIC = tuple(n for n, v in _ROWS.items() if v.deterministic)

_ALPHA = 0.05


def _correct(csv: Path, prefix: str = "seed_") -> tuple[np.ndarray, list[str]] | None:
    """``[S, n_test]`` 0/1 correctness from a predictions CSV (columns ``prefix*``)."""
    import pandas as pd

    if not csv.exists():
        return None
    df = pd.read_csv(csv)
    cols = [c for c in df.columns if c.startswith(prefix)]
    if not cols:
        return None
    return np.stack([(df[c].to_numpy() == df["y"].to_numpy()) for c in cols]).astype(float), cols


def _paired_tests(pairs: dict, n_resamples: int | None = None) -> dict[str, dict]:
    """Paired bootstrap test of ``a - b`` for each ``key: (a, b)`` (``[S, I]`` 0/1 arrays on
    the same seeds and test nodes), Holm-corrected over the pairs, draws settled by
    :func:`~contrastlab.evaluation.stats.settle_draws`. Returns ``key -> {"a", "b", "delta",
    "p", "p_holm", "n_seeds", "n_resamples", "family_size"}`` (accuracies as fractions)."""
    def run(r: int):
        out = {}
        for k, (a, b) in pairs.items():
            point, reps = bootstrap_per_item({"a": a, "b": b}, n_resamples=r, seed=0)
            out[k] = {"a": point["a"], "b": point["b"], "delta": point["a"] - point["b"],
                      "p": paired_pvalue(reps["a"] - reps["b"]), "n_seeds": int(a.shape[0]),
                      "n_resamples": r, "family_size": len(pairs)}
        return out, [e["p"] for e in out.values()]

    out, _ = settle_draws(run, len(pairs), _ALPHA, start=n_resamples)
    for k, ph in zip(out, holm([e["p"] for e in out.values()])):
        out[k]["p_holm"] = float(ph)
    return out


def _pairs(files: dict) -> dict:
    """``key: (a, b)``, the ``_correct`` rows of each ``key: (a_csv, b_csv)`` on the seed
    columns both have (same order); keys with a missing file or no common seed are left out."""
    out = {}
    for k, (fa, fb) in files.items():
        x, y = _correct(fa), _correct(fb)
        seeds = [c for c in x[1] if c in y[1]] if x is not None and y is not None else []
        if seeds:
            out[k] = (x[0][[x[1].index(c) for c in seeds]], y[0][[y[1].index(c) for c in seeds]])
    return out


def default_vs_tuned(root: Inputs | Path, names: list[str]) -> dict[str, dict]:
    """Tuned minus default test accuracy per loss, paired on the seeds both ran and the same
    test nodes (:func:`_paired_tests`, Holm over the losses; ``a`` = tuned, ``b`` = default).
    Losses without both prediction files are left out."""
    data = Inputs.of(root).data / "graph"
    return _paired_tests(_pairs({n: (data / f"{n}_test_pred.csv", data / "default" / f"{n}_test_pred.csv")
                                 for n in names}))


def supervised_rows(root: Inputs | Path, params, method: str = "supervised") -> dict[str, dict]:
    """``{name: metrics}`` of the rows of ``graph.supervised`` and ``graph.finetune`` of that
    ``method`` whose final runs exist, in params order."""
    mdir, rows = Inputs.of(root).metrics / "graph" / "supervised", track_variants("graph")
    return {n: m for n in [*params.graph.supervised, *params.graph.finetune]  # method: default supervised
            if (getattr(rows.get(n), "method", None) or "supervised") == method
            and (m := read_json(mdir / f"{n}.json", optional=True)) is not None}


def loss_vs_supervised(root: Inputs | Path, names: list[str], refs: list[str],
                       sub: str = "") -> dict:
    """Each loss minus each supervised reference on their common seeds (``(loss, ref) ->
    test``; Holm over all pairs); ``sub``: the losses' predictions folder."""
    data = Inputs.of(root).data / "graph"
    return _paired_tests(_pairs({(n, r): (data / sub / f"{n}_test_pred.csv",
                                          data / "supervised" / f"{r}_test_pred.csv")
                                 for r in refs for n in names}))


def graph_statistics(root: Inputs | Path, variants: list[str]) -> dict | None:
    """Paired statistics of the tuned variants and the baselines on the same test nodes, every
    row a candidate for best; the strongest baseline has the highest validation accuracy (the
    test estimate when none is recorded); deterministic baselines are repeated across seeds.

    Returns ``{"stats": summarize(...), "baseline", "baseline_by": "validation" | "test",
    "n_seeds": S, "n_test": I, "candidates", ...}`` or ``None`` without predictions.
    """
    data = Inputs.of(root).data / "graph"
    per_item: dict[str, np.ndarray] = {}
    vcols: list[str] = []
    for v in variants:
        if (c := _correct(data / f"{v}_test_pred.csv")) is not None:
            per_item[v] = c[0]
            vcols = vcols or c[1]
    if not per_item:
        return None
    shapes = {a.shape for a in per_item.values()}
    if len(shapes) != 1:
        raise ValueError(f"graph variants have different seed counts: "
                         f"{ {k: a.shape[0] for k, a in per_item.items()} }")
    (S, I), = shapes
    base = data / "baselines_test_pred.csv"  # _correct: None without it
    for b in _DETERMINISTIC:
        if (c := _correct(base, b)) is not None:
            per_item[b] = np.repeat(c[0][:1], S, axis=0)
    for b in (b for b in BASELINES if b not in _DETERMINISTIC):  # one run per seed
        rnd = _correct(base, f"{b}_seed_")
        want = [f"{b}_{c}" for c in vcols]  # seed k paired with seed k
        if rnd is not None and all(c in rnd[1] for c in want) and want:
            per_item[b] = rnd[0][[rnd[1].index(c) for c in want]]
    bases = [b for b in BASELINES if b in per_item]
    cands = list(per_item)
    n_res = draws_for(len(cands) - 1, _ALPHA)  # family: every other row vs the strongest baseline
    point, reps = bootstrap_per_item(per_item, n_resamples=n_res, seed=0)
    bjson = read_json(Inputs.of(root).metrics / "graph" / "baselines.json", optional=True) or {}
    val = {b: bjson.get(b, {}).get("val_acc") for b in bases}
    by = "validation" if bases and all(v is not None for v in val.values()) else "test"
    strongest = max(bases, key=val.get if by == "validation" else point.get, default=None)
    stats = summarize(point, reps, baseline=strongest, candidates=cands, alpha=_ALPHA,
                      redraw=lambda r: bootstrap_per_item(per_item, n_resamples=r, seed=0))
    return {"stats": stats, "baseline": strongest, "baseline_by": by, "n_seeds": S,
            "n_test": I, "candidates": cands, "n_resamples": stats[cands[0]]["n_resamples"], "variants": [v for v in variants if v in stats]}


def _resolution(st: dict) -> str:
    """Caption text: draws, paired test and smallest attainable Holm p of the table."""
    return table_resolution(st["stats"]) or f"{st['n_resamples']:,} bootstrap draws"
