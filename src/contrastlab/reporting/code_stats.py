"""Statistics of the code section: one table's metrics and per-query test ranks read back,
the strongest baseline, :func:`table_stats` and the default-vs-tuned table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..evaluation.stats import (bootstrap_per_item, draws_for, format_p, holm, paired_pvalue,
                                resample_counts, resolution_note, settle_draws, summarize,
                                table_resolution)
from ..io import read_json
from . import Cell, Inputs, Table, load_params_of
from .code_rows import (BM25, CONTROL_HYBRID, _is_baseline, _is_hybrid, _title, _trained_fusions,
                        _untrained)


def _seed_matrix(part):
    """``[S, I]`` ranks of a frame's rows per seed (sorted by seed and id), and seed 0's rows."""
    part = part.sort_values(["seed", "id"])
    seeds = sorted(part["seed"].unique())
    return (np.stack([part[part["seed"] == s]["rank"].to_numpy() for s in seeds]),
            part[part["seed"] == seeds[0]])


def _load_baselines(t: dict, mdir: Path, ddir: Path) -> None:
    """The untrained baselines (one run each, ``[1, I]``); they fix the query order."""
    b = read_json(mdir / "baselines.json", optional=True)
    if b is None or not (ddir / "baselines_ranks.csv").exists():
        return
    br = pd.read_csv(ddir / "baselines_ranks.csv")
    for k, m in b["baselines"].items():  # one run: seed 0
        _keep(t, k, {**m, "corpus_size": b["corpus_size"], "n_seeds": 0},
              br[br["baseline"] == k].assign(seed=0))


def _keep(t: dict, name: str, m: dict, frame) -> bool:
    """Store ``name``'s metrics and ``[S, I]`` ranks (``frame``'s) when its queries are the
    table's (the first row read fixes them); False for a file evaluated on another split."""
    mat, first = _seed_matrix(frame)
    ids = first["id"].to_numpy()
    if t["order"] is None:
        t["order"], t["repo"] = ids, first["repo"].astype(str).to_numpy()
    if len(ids) != len(t["order"]) or (ids != t["order"]).any():
        return False
    t["metrics"][name], t["ranks"][name] = m, mat
    return True


def _load_variants(t: dict, mdir: Path, ddir: Path) -> None:
    """Every trained variant's ranks (a stale file evaluated on another split is skipped)."""
    for f in sorted(mdir.glob("*.json")):
        csv = ddir / f"{f.stem}_ranks.csv"
        if f.stem != "baselines" and not f.stem.startswith("hybrids") and csv.exists():
            _keep(t, f.stem, read_json(f), pd.read_csv(csv))


def _load_hybrids(t: dict, mdir: Path, ddir: Path) -> None:
    """``hybrids*.json`` with the control at every grid weight (ranks may be gzipped)."""
    for hfile in sorted(mdir.glob("hybrids*.json")):
        hranks = next((p for p in (ddir / f"{hfile.stem}_ranks.csv{z}" for z in ("", ".gz"))
                       if p.exists()), None)
        if hranks is None or t["order"] is None:
            continue
        h = read_json(hfile)
        hr = pd.read_csv(hranks)
        for k, m in h["hybrids"].items():
            part = hr[hr["hybrid"] == k]
            if part.empty or not _keep(t, k, {**m, "corpus_size": h["corpus_size"],
                                              "_variant_metrics": t["metrics"].get(m.get("variant"))}, part):
                continue
            for g in m.get("test_by_weight", []):  # the control evaluated at every grid weight
                pw = hr[hr["hybrid"] == g["hybrid"]]
                if len(pw) == len(part):
                    t["controls"].setdefault(k, {})[float(g["weight"])] = _seed_matrix(pw)[0]


def _load_table(root: Inputs | Path, name: str) -> dict | None:
    """Metrics and per-query ranks of one table (``reports/metrics/<name>``): ``metrics``,
    ``ranks`` (name -> ``[S, I]``), ``repo`` (``[I]`` clusters) and ``controls`` (control ->
    weight -> ``[S, I]`` test ranks)."""
    inp = Inputs.of(root)
    mdir, ddir = inp.metrics / name, inp.data / name
    t = {"metrics": {}, "ranks": {}, "controls": {}, "order": None, "repo": None}
    for load in (_load_baselines, _load_variants, _load_hybrids):
        load(t, mdir, ddir)
    del t["order"]
    return t if t["metrics"] else None


def control_at_same_weight(metrics: dict, controls: dict) -> dict:
    """Trained score fusion -> the control's test ranks ``[1, I]`` at that fusion's weight
    (empty when the control was not evaluated at every weight, e.g. an older table)."""
    at = controls.get(CONTROL_HYBRID, {})
    return {n: at[float(metrics[n]["weight"])] for n in _trained_fusions(metrics)
            if "weight" in metrics[n] and float(metrics[n]["weight"]) in at}


def _to_seeds(v: np.ndarray, s: int) -> np.ndarray:
    """``[s, I]`` float ranks: a one-seed row repeated, a multi-seed row cut to ``s`` seeds."""
    return (np.repeat(v[:1], s, 0) if v.shape[0] == 1 else v[:s]).astype(np.float64)


def _same_weight_family(mats: dict, same_w: dict, f, draws, s: int) -> dict:
    """Each trained fusion against the control at the fusion's own weight: the paired per-item
    difference against a zero baseline on the table's draws (Holm over the fusions), and
    ``control_mean``, the control's estimate at that weight."""
    per, ctl = {}, {}
    for n, c in same_w.items():
        c = _to_seeds(c, s)
        per[n] = f(mats[n]).astype(np.float64) - f(c)
        ctl[n] = float(f(c).mean())
    zero = "__zero__"
    per[zero] = np.zeros_like(next(iter(per.values())))
    point, reps = bootstrap_per_item(per, draws=draws)
    res = summarize(point, reps, candidates=list(per), baseline=zero)
    # the difference's CI is the CI of its own row (``ci_low``, ``ci_high``)
    return {n: {**res[n], "delta_ci_low": res[n]["ci_low"], "delta_ci_high": res[n]["ci_high"],
                "control_mean": ctl[n]} for n in same_w}


def strongest_baseline(metrics: dict) -> str | None:
    """The baseline row with the best validation Rank@10 (``val_rank_at_10``; ties: name order)."""
    cands = [n for n in metrics if _is_baseline(n) and "val_rank_at_10" in metrics[n]]
    return max(sorted(cands), key=lambda n: metrics[n]["val_rank_at_10"], default=None)


def only_in_top10(ranks: dict, a: str, b: str, k: int = 10) -> float:
    """Mean over seeds of #test queries whose true body ``a`` ranks in its top ``k`` and ``b``
    does not (``ranks``: name -> int ``[S, I]``; a one-seed row is repeated)."""
    ra, rb = ranks[a], ranks[b]
    n = max(len(ra), len(rb))
    return float(np.mean([((ra[min(i, len(ra) - 1)] <= k) & (rb[min(i, len(rb) - 1)] > k)).sum()
                          for i in range(n)]))


def table_stats(ranks: dict, repo, n_resamples: int | None = None, seed: int = 0,
                baseline: str | None = None, same_w: dict | None = None) -> dict[str, dict]:
    """CIs, best-row statistics and paired tests for Rank@1/5/10 and MRR from per-query ranks.

    Args:
        ranks: row name -> int ``[S_row, I]`` ranks (one-seed rows are repeated over the
            seeds; multi-seed rows are cut to the smallest seed count).
        repo: ``[I]`` bootstrap clusters (repository groups of the test queries).
        baseline: the strongest baseline; every row is tested against it.
        same_w: :func:`control_at_same_weight`; adds ``"control_same_w"``.
        n_resamples: bootstrap draws (default ``draws_for`` of the largest family).

    Returns:
        metric -> ``{"best": summarize(...) over every row (95 % Model Confidence Set,
        Hansen, Lunde & Nason 2011), "baseline", <BM25>: the hybrids against BM25, ...}``.
    """
    # untrained rows (baselines and their hybrids) have one deterministic run: repeated per seed
    multi = [k for k, v in ranks.items() if v.shape[0] > 1 or not _untrained(k)]
    s = min([ranks[k].shape[0] for k in multi], default=1)
    mats = {k: _to_seeds(v, s) for k, v in ranks.items()}
    n_items = next(iter(mats.values())).shape[1]
    n_resamples = n_resamples or draws_for(max(1, len(ranks) - 1))
    draws = resample_counts(s, n_items, clusters=repo, n_resamples=n_resamples, seed=seed)

    return {metric: _metric_stats(mats, f, draws, list(ranks), repo, seed, baseline, same_w, s)
            for metric, f in _PER_METRIC.items()}


#: Per-query value of each metric from a rank.
_PER_METRIC = {"rank_at_1": lambda r: (r <= 1), "rank_at_5": lambda r: (r <= 5),
               "rank_at_10": lambda r: (r <= 10), "mrr": lambda r: 1.0 / r}


def _metric_stats(mats: dict, f, draws, names: list[str], repo, seed: int, baseline: str | None,
                  same_w: dict | None, s: int) -> dict:
    """One metric's families (:func:`table_stats`)."""
    per = {k: f(v) for k, v in mats.items()}
    point, reps = bootstrap_per_item(per, draws=draws)

    def family(cands, base):
        return summarize(point, reps, candidates=cands, baseline=base,
                         redraw=lambda r: bootstrap_per_item(per, clusters=repo, n_resamples=r, seed=seed))
    base = baseline if baseline in point and len(point) > 1 else None
    res = {"best": family(names, base)}
    if base is not None:
        res["baseline"] = res["best"]
    hyb = [n for n in names if _is_hybrid(n)]
    if BM25 in point and hyb:  # Holm family: the hybrids, each against BM25 alone
        res[BM25] = family(hyb + [BM25], BM25)
    trained_hyb = _trained_fusions(hyb)
    if CONTROL_HYBRID in point and trained_hyb:  # each trained fusion vs the untrained one
        res["control"] = family(trained_hyb + [CONTROL_HYBRID], CONTROL_HYBRID)
    if same_w:  # each trained fusion against the control at the fusion's own weight
        res["control_same_w"] = _same_weight_family(mats, same_w, f, draws, s)
    return res


def _resolution(stats: dict) -> str:
    """Draws, family size and floor of a :func:`table_stats` result, for its caption."""
    rows = stats["rank_at_10"]["best"]
    return table_resolution(rows) or f"{next(iter(rows.values()))['n_resamples']:,} bootstrap draws"


def _declared(code, names: list[str]) -> str:
    """``lr 0.001, τ0 0.07`` (params.yaml's values: a variant's own, else ``code.train``'s),
    one entry per distinct pair, naming the losses when they differ."""
    pairs = {}
    for v in names:
        var = code.variants.get(v)
        lr = code.train.lr if getattr(var, "lr", None) is None else var.lr
        t0 = (code.train.init_temperature if getattr(var, "temperature", None) is None
              else var.temperature)
        pairs.setdefault(f"lr {lr:g}, τ0 {t0:g}", []).append(v)
    if len(pairs) == 1:
        return next(iter(pairs))
    return "; ".join(f"{k} ({', '.join(vs)})" for k, vs in pairs.items())


def default_vs_tuned(root: Inputs | Path, loaded: dict, n_resamples: int | None = None) -> Table | None:
    """Each tuned loss's declared configuration (trial 0, on the final seeds) against its tuned
    choice: Rank@10, test CIs and the paired difference (Holm over the losses); ``None``
    before ``default_code`` ran."""
    inp = Inputs.of(root)
    mdir, ddir = inp.metrics / "code" / "default", inp.data / "code" / "default"
    mats, vals = {}, {}
    for f in sorted(mdir.glob("*.json")):
        m, v = read_json(f), f.stem
        if not m.get("searched") or v not in loaded["ranks"] or not (ddir / f"{v}_ranks.csv").exists():
            continue
        mat = _seed_matrix(pd.read_csv(ddir / f"{v}_ranks.csv"))[0]
        if mat.shape[1] != loaded["ranks"][v].shape[1]:
            continue  # evaluated on another split
        mats[f"{v}|default"], mats[f"{v}|tuned"] = mat, loaded["ranks"][v]
        vals[v] = (m["val_rank_at_10"], loaded["metrics"][v].get("val_rank_at_10"))
    if not mats:
        return None
    s, n_test = min(x.shape[0] for x in mats.values()), next(iter(mats.values())).shape[1]
    names = list(vals)
    per = {k: (x[:s] <= 10).astype(np.float64) for k, x in mats.items()}

    def run(r: int):
        draws = resample_counts(s, n_test, clusters=loaded["repo"], n_resamples=r, seed=0)
        point, reps = bootstrap_per_item(per, draws=draws)
        ps = [paired_pvalue(reps[f"{v}|tuned"] - reps[f"{v}|default"]) for v in names]
        return (point, reps, ps), ps

    (point, reps, ps), n_resamples = settle_draws(run, len(names), start=n_resamples)
    st, p = summarize(point, reps), holm(ps)
    declared = _declared(load_params_of(inp.root).code, names)
    src = "test Rank@10, bootstrap over seeds and repository-clustered queries"
    rows = []
    for v, ph in zip(names, p):
        d, t = (Cell(e["mean"], e["ci_low"], e["ci_high"], scale=100, digits=1, source=src)
                for e in (st[f"{v}|default"], st[f"{v}|tuned"]))
        diff = point[f"{v}|tuned"] - point[f"{v}|default"]
        rows.append([_title(v, loaded["metrics"][v]), f"{100 * vals[v][0]:.1f}", d,
                     f"{100 * vals[v][1]:.1f}" if vals[v][1] is not None else "-", t,
                     f"{100 * diff:+.1f} ({format_p(ph, n_resamples, len(names))})"])
    return Table("Default vs tuned retrieval: each loss's declared configuration and its tuned choice",
                 ["loss", "default val R@10 %", "default test R@10 % [CI]", "tuned val R@10 %",
                  "tuned test R@10 % [CI]", "Δ test (tuned − default, Holm p)"], rows,
                 note=f"Default: code.variants.<loss> as declared ({declared}; trial 0 of its "
                      "study), trained on the final seeds by default_code; tuned: the study's choice "
                      "(train_code). Validation: mean over seeds of the validation Rank@10 of "
                      f"the epoch early stopping kept; test: {n_test:,} signatures against all bodies, 95 % "
                      "CI (BC percentile) and paired p from the bootstrap over seeds and queries "
                      "clustered by repository group (" + resolution_note(n_resamples, len(names))
                      + "). The from-scratch ablations are not tuned and have no row.")

