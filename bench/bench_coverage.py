"""Simulated coverage of the report's 95 % intervals at every data set's own shape.

For each data set and metric the report gives an interval for, draws synthetic test sets of
the real shape from a population whose value is known, runs the report's procedure (bootstrap
+ BC percentile interval) and counts how often the interval covers the population value
(contrastlab.evaluation.coverage; docs/statistics.md explains each model):

- graph: 1000 test nodes x the final seeds (graph.final.seeds), node difficulty ~ Beta(8, 2),
  seed noise on the logit;
- code: the real repository groups of the test signatures (sizes from
  reports/data/code/<row>_ranks.csv), 3 seeds; Rank@1/5/10 (hits) and MRR (graded), each
  calibrated to the median row's value, between-group spread and seed-to-seed SD;
- every multi-label set in multilabel.datasets: its real test size and the prevalence of each
  label with a test positive (data/multilabel/<set>/data.safetensors, from
  `dvc repro build_multilabel`), separation calibrated to the median row's test mAP and its
  seed noise to the median row's seed-to-seed SD of test mAP and the share of score noise the
  seeds have in common to the median row's test_score_seed_corr, 5 seeds;
  micro-/macro-F1 at two thresholds and mAP over labels with >= k test positives for every k
  of --min-pos; per set, the report's k is the smallest with coverage >= 0.92 there
  (map_min<k>pos in the output; none: no k covers, and the report gives that set's mAP
  without a coverage claim);
- fine-tuning: split a and split b, queries clustered by problem (sizes from
  reports/data/finetune/humaneval_dataset.json), 3 seeds; Rank@1, kNN@5 problem x tier purity
  and AP at the median trained row's mean and seed-to-seed SD
  (reports/metrics/finetune/items/<row>.npz), and the within-problem tier metrics of the
  headline (same-tier AUC, nearest same-problem neighbour's tier, one-token mutants
  separated; reports/metrics/finetune/tier_items.npz) over the queries where they are defined.

Multi-label and fine-tuning run the crossed-effects replicates of their tables
(contrastlab.evaluation.stats_crossed: the seed x item interaction counted once); graph and
code the plain two-level bootstrap of theirs.

Writes ``{"<set>": {"<metric>": coverage}}`` (the metrics the report shows, mAP replaced by
``map_min<k>pos``) to --json and every figure (all k, widths, settings) beside it
(``coverage_detail.json``). About 20 CPU-minutes at the defaults.

    python bench/bench_coverage.py --json reports/metrics/coverage.json

A multi-label set run outside the pipeline (bibtex under its preset, say) is simulated from its
own folders, its figures kept apart from the report's:

    python bench/bench_coverage.py --params /tmp/bib/params.yaml --only bibtex \
        --ml-data-dir /tmp/bib/data --ml-metrics-dir reports/metrics/multilabel_bibtex/tuned \
        --json reports/metrics/multilabel_bibtex/coverage.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.special import expit, logit

from contrastlab.evaluation.coverage import (calibrate_mu, calibrate_operating_point, coverage,
                                             population_clustered, sim_accuracy, sim_clustered,
                                             sim_f1_operating_point, sim_multilabel)
from contrastlab.io import atomic_path
from contrastlab.params import load_params

ROOT = Path(__file__).resolve().parents[1]
LO, HI = 0.92, 0.98
F1_TOL = 0.03  # simulated vs real median F1: the simulation is at the real operating point


def _link_for(mean: float, sd: float) -> float:
    """``link`` with ``E[sigmoid(link + sd Z)] = mean`` (bisection)."""
    lo, hi = -12.0, 12.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if population_clustered(mid, sd) < mean else (lo, mid)
    return (lo + hi) / 2


def _tau(mean: float, sd_seed: float) -> float:
    """Seed SD on the logit scale from the real seed-to-seed SD of a mean (delta method)."""
    return float(np.clip(sd_seed / max(mean * (1 - mean), 1e-3), 0.005, 0.5))


def finetune_shapes(root: Path) -> dict[str, dict]:
    """Per split and metric: mean and seed-to-seed SD of the median trained row
    (reports/metrics/finetune/items/<row>.npz, ``[seeds, queries]`` per metric)."""
    out: dict[str, dict] = {}
    files = [f for f in sorted((root / "reports" / "metrics" / "finetune" / "items").glob("*.npz"))]
    for split in ("a", "b"):
        # every column of the split tables; a metric undefined for some queries (NaN: split b's
        # Rank@k and AP) over the queries where every seed has it
        for metric, binary in (("rank1", True), ("rank5", True), ("knn5_pxt", False), ("knn5_tier", False),
                               ("knn5_problem", False), ("ap", False), ("probe_tier", True)):
            vals = []
            for f in files:
                with np.load(f) as z:
                    a = z.get(f"{split}/{metric}")
                    cols = np.isfinite(a).all(0) if a is not None and a.ndim == 2 else np.zeros(0, bool)
                    if a is not None and a.ndim == 2 and a.shape[0] > 1 and cols.sum() > 1:
                        a = a[:, cols]
                        vals.append((float(a.mean()), float(a.mean(1).std(ddof=1)), int(cols.sum())))
            if vals:
                m, sd_seed, n_q = sorted(vals)[len(vals) // 2]
                out[f"{split}/{metric}"] = {"mean": m, "tau": _tau(m, sd_seed), "binary": binary, "queries": n_q}
    # the within-problem tier metrics (the fine-tuning headline): per row ``[seeds, queries]``
    # in tier_items.npz, undefined (NaN) for queries without another tier in their problem
    tier = root / "reports" / "metrics" / "finetune" / "tier_items.npz"
    if tier.exists():
        with np.load(tier) as z:
            for split in ("a", "b"):
                for metric, binary in (("wp_auc", False), ("wp_nn_tier", True), ("wp_pair_sep", False)):
                    vals = []
                    for key in z.files:
                        if not key.endswith(f"/{split}/{metric}"):
                            continue
                        a = z[key]
                        cols = np.isfinite(a).all(0) if a.ndim == 2 else np.zeros(0, bool)
                        if a.ndim == 2 and a.shape[0] > 1 and cols.sum() > 1:
                            a = a[:, cols]
                            vals.append((float(a.mean()), float(a.mean(1).std(ddof=1)), int(cols.sum())))
                    if vals:
                        m, sd_seed, n_q = sorted(vals)[len(vals) // 2]
                        out[f"{split}/{metric}"] = {"mean": m, "tau": _tau(m, sd_seed),
                                                    "binary": binary, "queries": n_q}
    return out


def code_shapes(root: Path) -> dict[str, dict]:
    """Cluster sizes and, per metric, the mean and between-group logit SD of the median row."""
    import pandas as pd

    files = sorted((root / "reports" / "data" / "code").glob("*_ranks.csv"))
    rows = [pd.read_csv(f) for f in files if "seed" in pd.read_csv(f, nrows=1).columns]
    if not rows:
        raise SystemExit("no reports/data/code/<row>_ranks.csv with a seed column")
    first = rows[0][rows[0]["seed"] == rows[0]["seed"].min()]
    sizes = first.groupby("repo").size().to_numpy()
    out = {"sizes": sizes.tolist()}
    for metric, f in (("rank_at_1", lambda r: r <= 1), ("rank_at_5", lambda r: r <= 5),
                      ("rank_at_10", lambda r: r <= 10), ("mrr", lambda r: 1.0 / r)):
        stats = []
        for r in rows:
            v = f(r["rank"].to_numpy()).astype(float)
            per = pd.Series(v).groupby(r["repo"].to_numpy()).mean().to_numpy()
            by_seed = pd.Series(v).groupby(r["seed"].to_numpy()).mean().to_numpy()
            sd_seed = float(by_seed.std(ddof=1)) if by_seed.size > 1 else 0.0
            stats.append((v.mean(), np.std(logit(np.clip(per, 0.02, 0.98))), sd_seed))
        m, sd, sd_seed = sorted(stats)[len(stats) // 2]
        out[metric] = {"mean": float(m), "sigma": float(max(sd, 0.2)), "binary": metric != "mrr",
                       "tau": _tau(m, sd_seed)}
    return out


def sim_empirical_delta(rng: np.random.Generator, *, diff: np.ndarray, clusters: np.ndarray,
                        n_resamples: int = 1000, crossed: bool = False):
    """One replication of the paired difference's interval where the models really are: the
    committed per-item differences ``diff`` (``[S, I]``, one row per training seed of the
    contrastive row; the baseline is deterministic) are the population (truth: their mean),
    a new test set is drawn from it by its clusters (with replacement, each draw a cluster of
    its own), and the report's procedure (:func:`contrastlab.evaluation.stats.resample_counts`
    draws, bootstrap of the mean, BC interval) is run on it. The seeds are the population's
    own (no new training seeds are drawn).

    Returns:
        ``(truth, estimate, low, high)``."""
    from contrastlab.evaluation.stats import bias_corrected_interval, bootstrap_per_item, resample_counts
    from contrastlab.evaluation.stats_crossed import bootstrap_per_item_crossed

    if clusters is None:  # independent items (graph nodes): the table resamples items
        idx, new_g = rng.integers(0, diff.shape[1], diff.shape[1]), None
    else:
        groups = np.unique(clusters, return_inverse=True)[1]
        members = [np.flatnonzero(groups == g) for g in range(groups.max() + 1)]
        pick = rng.integers(0, len(members), len(members))
        idx = np.concatenate([members[g] for g in pick])
        new_g = np.concatenate([np.full(len(members[g]), j) for j, g in enumerate(pick)])
    x = diff[:, idx]
    draws = resample_counts(x.shape[0], x.shape[1], clusters=new_g, n_resamples=n_resamples,
                            seed=int(rng.integers(2**31)))
    point, reps = (bootstrap_per_item_crossed if crossed else bootstrap_per_item)({"d": x}, draws=draws)
    lo, hi = bias_corrected_interval(point["d"], reps["d"])
    return float(diff.mean()), point["d"], lo, hi


def answer_deltas(root: Path) -> dict[str, dict]:
    """The README answer's paired differences with per-item data (``reports/summary.json``
    ``answer``): ``{"code": ..., "code_secondary": ..., "code_more1": ..., "graph": ...}``, each
    ``{"diff": [S, I] best row - strongest baseline, "clusters": [I], "rows": (best, baseline)}``.
    Code: Rank@10 hits per test signature, clustered by repository (reports/data/<code,
    code_biencoder_gpu, code_biencoder_cpu (the CPU-budget preset: ``more``)>/);
    graph: correct test nodes (reports/data/graph/), no clusters (``None``); fine-tuning (with
    ``data/finetune/humaneval/variants.parquet``, stage ``finetune_data``): the tier metric's
    per-query values less the fixed tier-blind value, clustered by problem, crossed replicates."""
    import pandas as pd

    ans = json.loads((root / "reports" / "summary.json").read_text()).get("answer", {})
    out = {}
    code = ans.get("code") or {}
    more = [(f"code_more{k}", e, "code_biencoder_cpu") for k, e in enumerate(code.get("more", []), start=1)]
    for key, entry, folder in [("code", ans.get("code"), "code"),
                               ("code_secondary", code.get("secondary"), "code_biencoder_gpu"), *more]:
        if not entry:
            continue
        d = root / "reports" / "data" / folder
        a = pd.read_csv(d / f"{entry['best_loss']}_ranks.csv").sort_values(["seed", "id"])
        b = pd.read_csv(d / "baselines_ranks.csv")
        b = b[b["baseline"] == entry["strongest_baseline"]].sort_values("id")
        hits = np.stack([(g["rank"].to_numpy() <= 10) for _, g in a.groupby("seed")]).astype(float)
        first = a[a["seed"] == a["seed"].min()]
        if not (first["id"].to_numpy() == b["id"].to_numpy()).all():
            raise SystemExit(f"{key}: the rows' test queries differ")
        out[key] = {"diff": hits - (b["rank"].to_numpy() <= 10)[None].astype(float),
                    "clusters": first["repo"].to_numpy(), "rows": (entry["best_loss"], entry["strongest_baseline"])}
    f, ft_data = ans.get("finetune"), root / "data" / "finetune" / "humaneval" / "variants.parquet"
    if f and ft_data.exists():  # the tier metric against the fixed tier-blind value: the row's own interval
        df = pd.read_parquet(ft_data)
        with np.load(root / "reports" / "metrics" / "finetune" / "tier_items.npz") as z:
            arrs = {k: z[k] for k in z.files if k.startswith(f"{f['best_loss']}/")}
        for k, x in arrs.items():  # the split and metric whose mean the answer reports
            keep = ~np.isnan(x).any(0)
            split = k.split("/")[1]
            if split in ("a", "b") and abs(float(x[:, keep].mean()) - f["best_loss_value"]) < 1e-6:
                probs = df.loc[df["split"] == f"test_{split}", "problem"].astype(str).to_numpy()
                out["finetune"] = {"diff": x[:, keep] - f["baseline_value"], "clusters": probs[keep],
                                   "rows": (f["best_loss"], f["strongest_baseline"]), "crossed": True}
    g = ans.get("graph")
    if g:
        d = root / "reports" / "data" / "graph"
        a = pd.read_csv(d / f"{g['best_loss']}_test_pred.csv").sort_values("node")
        b = pd.read_csv(d / "baselines_test_pred.csv").sort_values("node")
        y = a["y"].to_numpy()
        seeds = [c for c in a.columns if c.startswith("seed_")]
        out["graph"] = {"diff": np.stack([(a[c].to_numpy() == y) for c in seeds]).astype(float)
                        - (b[g["strongest_baseline"]].to_numpy() == y)[None].astype(float),
                        "clusters": None, "rows": (g["best_loss"], g["strongest_baseline"])}
    return out


def multilabel_shape(data_dir: Path, metrics_dir: Path, ds: str) -> dict:
    """Test size, the prevalences of labels with a test positive, and the target mAP
    (``data_dir/<ds>/data.safetensors``; the final runs ``metrics_dir/<ds>_*.json``)."""
    from safetensors.numpy import load_file

    f = data_dir / ds / "data.safetensors"
    if not f.exists():
        raise SystemExit(f"{f} missing: run `dvc repro build_multilabel` (or dvc checkout) first")
    z = load_file(str(f))
    y = z["y_test"]
    npos = y.sum(0)
    runs = [json.loads(p.read_text()) for p in metrics_dir.glob(f"{ds}_*.json")]
    med = lambda k: float(np.median([m[k] for m in runs if isinstance(m.get(k), (int, float))]))  # noqa: E731
    if not runs:
        raise SystemExit(f"no final runs {metrics_dir}/{ds}_*.json: run `dvc repro train_multilabel` first")
    maps = sorted(m["map"] for m in runs if isinstance(m.get("map"), float))
    sds = sorted(m["map_std"] for m in runs if m.get("n_seeds", 1) > 1 and "map_std" in m)
    rhos = sorted(m["test_score_seed_corr"] for m in runs
                  if isinstance(m.get("test_score_seed_corr"), float))
    return {"seed_score_corr": float(np.clip(rhos[len(rhos) // 2], 0.0, 1.0)) if rhos else 0.0,
            "n": int(y.shape[0]), "prev": (npos[npos > 0] / y.shape[0]).tolist(),
            "labels_without_positive": int((npos == 0).sum()), "counts": npos.tolist(),
            "target_map": maps[len(maps) // 2] if maps else 0.5,
            "seed_sd_map": sds[len(sds) // 2] if sds else 0.005,
            # the operating point: the real rows' medians, and every split's label vectors
            "real": {k: med(k) for k in ("micro_f1", "macro_f1", "micro_f1_val_t", "macro_f1_val_t",
                                         "threshold_val", "micro_f1_val_t_std")},
            "n_val": int(z["y_val"].shape[0]),
            "label_rows": np.concatenate([z[k] for k in ("y_train", "y_val", "y_test")]).astype(np.int64)}


def seed_tau(prev: list[float], mu: float, seed_sd_map: float) -> float:
    """The per-seed SD of the separation whose effect on the population mAP equals the real
    seed-to-seed SD of test mAP (median row): ``seed_sd_map / (d mAP / d mu)``."""
    from contrastlab.evaluation.coverage import population_ap

    slope = (np.mean([population_ap(p, mu + 0.05) for p in prev])
             - np.mean([population_ap(p, mu - 0.05) for p in prev])) / 0.1
    return float(np.clip(seed_sd_map / max(slope, 1e-6), 0.005, 0.5))


def markdown_table(detail: dict) -> str:
    """The docs/statistics.md table: data set, shape, metric, coverage, mean width."""
    lines = ["| data set | shape simulated | metric | coverage | mean width | replications |",
             "|---|---|---|---|---|---|"]
    for name, e in detail.items():
        if name.startswith("_"):
            continue
        st = e["settings"]
        if "test_rows" in st:
            shape = (f"{st['test_rows']} rows, {st['labels_with_positive']} labels with a test positive, "
                     f"{st['seeds']} seeds, {st['draws']} draws")
        elif "groups" in st:
            shape = f"{st['queries']} queries in {st['groups']} groups, {st['seeds']} seeds, {st['draws']} draws"
        elif "items" in st:  # delta/<track>: an empirical population
            shape = (f"{st['items']} items" + (f" in {st['clusters']} clusters" if st["clusters"] else "")
                     + f", {st['seeds']} seeds, {st['draws']} draws (empirical)")
        elif "problems" in st:
            shape = f"{st['queries']} queries in {st['problems']} problems, {st['seeds']} seeds, {st['draws']} draws"
        else:
            shape = f"{st['test_nodes']} nodes, {st['seeds']} seeds, {st['draws']} draws"
        for m, v in e["metrics"].items():
            if v.get("truth") != v.get("truth"):  # a recorded value, not an interval (NaN truth)
                continue
            lines.append(f"| {name} | {shape} | {m} | {v['coverage']:.3f} | {v['width']:.4f} | {v['n']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, default=ROOT / "reports" / "metrics" / "coverage.json")
    ap.add_argument("--reps", type=int, default=200, help="replications per data set")
    ap.add_argument("--large-reps", type=int, default=40,
                    help="replications for multi-label sets over 3000 test rows (tmc2007-500)")
    ap.add_argument("--draws", type=int, default=1000, help="bootstrap draws (graph, code, fine-tuning)")
    ap.add_argument("--ml-draws", type=int, default=300, help="bootstrap draws (multi-label)")
    ap.add_argument("--min-pos", type=int, nargs="+", default=[1, 5, 10, 20, 40])
    ap.add_argument("--only", nargs="*", default=None, help="data sets to (re)run; others kept")
    ap.add_argument("--keep", action="store_true",
                    help="code / fine-tuning: keep the entries coverage_detail.json has, simulate the rest")
    ap.add_argument("--f1-only", action="store_true",
                    help="multi-label: rerun only the F1 operating-point simulation, keeping the set's "
                         "mAP figures from coverage_detail.json")
    ap.add_argument("--graph-seeds", type=int, default=None,
                    help="graph final seeds (default: len(graph.final.seeds) in params.yaml)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml",
                    help="params file: its multilabel.datasets are the multi-label sets simulated")
    ap.add_argument("--ml-data-dir", type=Path, default=ROOT / "data" / "multilabel",
                    help="built multi-label sets (<dir>/<set>/data.safetensors)")
    ap.add_argument("--ml-metrics-dir", type=Path, default=ROOT / "reports" / "metrics" / "multilabel",
                    help="final multi-label runs (<dir>/<set>_<row>.json), for each set's mAP, "
                         "seed-to-seed SD and test_score_seed_corr")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, one data set, output to a temporary folder: a quick check that "
                         "the benchmark runs (tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        import tempfile
        args.reps, args.large_reps, args.draws, args.ml_draws = 3, 2, 50, 20
        args.only = ["graph"]
        args.json = Path(tempfile.mkdtemp(prefix="bench_coverage_")) / "coverage.json"
    params = load_params(args.params)
    detail_path = args.json.with_name("coverage_detail.json")
    detail = json.loads(detail_path.read_text()) if detail_path.exists() and args.only else {}
    want = lambda name: args.only is None or name in args.only  # noqa: E731
    for group in ("code", "finetune", "delta"):  # a rerun group replaces all of its entries (--keep: adds)
        if want(group) and not args.keep:
            for k in [k for k in detail if k.startswith(group + "/")]:
                del detail[k]

    def run(name: str, metric_map: dict, sim, n_rep: int, settings: dict, merge: str = "", **kw) -> None:
        t = time.time()
        cov = coverage(sim, n_rep, seed=args.seed, **kw)
        res = {m: {"coverage": cov[f"{k}.coverage"], "width": cov[f"{k}.width"],
                   "contains_estimate": cov[f"{k}.contains_estimate"], "n": int(cov[f"{k}.n"]),
                   "estimate": cov[f"{k}.estimate"], "truth": cov[f"{k}.truth"]}
               for m, k in metric_map.items() if f"{k}.coverage" in cov}
        if merge:  # a second simulation of the same set: its metrics and settings added
            detail[name]["metrics"].update(res)
            detail[name]["settings"][merge] = {**settings, "replications": n_rep}
        else:
            detail[name] = {"metrics": res, "settings": {**settings, "replications": n_rep}}
        print(f"{name}: " + ", ".join(f"{m} {v['coverage']:.3f}" for m, v in res.items())
              + f" ({time.time() - t:.0f} s)", flush=True)

    if want("graph"):
        s = args.graph_seeds or len(params.graph.final.seeds)
        run("graph", {"accuracy": "value"}, sim_accuracy, args.reps,
            {"test_nodes": 1000, "seeds": s, "draws": args.draws, "node_difficulty": "Beta(8, 2)",
             "seed_sd_logit": 0.15},
            n_items=1000, n_seeds=s, n_resamples=args.draws)
    if want("code"):
        sh = code_shapes(ROOT)
        for metric in ("rank_at_1", "rank_at_5", "rank_at_10", "mrr"):
            m = sh[metric]
            sd_item = 0.0 if m["binary"] else 1.5
            link = _link_for(m["mean"], float(np.sqrt(m["sigma"] ** 2 + m["tau"] ** 2 + sd_item ** 2)))
            run(f"code/{metric}", {metric: "value"}, sim_clustered, args.reps,
                {"groups": len(sh["sizes"]), "queries": int(sum(sh["sizes"])), "seeds": 3,
                 "draws": args.draws, "mean": m["mean"], "group_sd_logit": m["sigma"],
                 "query_sd_logit": sd_item, "seed_sd_logit": m["tau"]},
                sizes=sh["sizes"], n_seeds=3, link=link, sigma=m["sigma"], tau=m["tau"],
                sd_item=sd_item, binary=m["binary"], n_resamples=args.draws)
    ml_sets = list(params.multilabel.datasets)
    for ds in ml_sets:
        if not want(ds):
            continue
        sh = multilabel_shape(args.ml_data_dir, args.ml_metrics_dir, ds)
        mu = calibrate_mu(sh["prev"], sh["target_map"])
        tau = seed_tau(sh["prev"], mu, sh["seed_sd_map"])
        n_rep = args.reps if sh["n"] <= 3000 else args.large_reps
        keys = {f"map_min{k}pos": f"map_k{k}" for k in args.min_pos}
        if args.f1_only and ds in detail:  # keep this set's mAP figures (the same law and draws)
            detail[ds]["metrics"] = {m: v for m, v in detail[ds]["metrics"].items() if m.startswith("map_min")}
        else:
            run(ds, keys, sim_multilabel, n_rep,
                {"test_rows": sh["n"], "labels_with_positive": len(sh["prev"]),
                 "labels_without_positive": sh["labels_without_positive"],
                 "labels_at_or_above": {str(k): int(sum(c >= k for c in sh["counts"])) for k in args.min_pos},
                 "seeds": 5, "draws": args.ml_draws, "target_map": sh["target_map"], "mu": mu,
                 "seed_sd_map": sh["seed_sd_map"], "tau": tau, "thresholds_sd_units": [1.0, mu / 2],
                 "seed_score_corr": sh["seed_score_corr"], "replicates": "crossed"},
                n_items=sh["n"], n_seeds=5, prevalence=tuple(sh["prev"]), mu=mu, tau=tau,
                thresholds=(1.0, mu / 2), min_pos=tuple(args.min_pos), n_resamples=args.ml_draws,
                rho=sh["seed_score_corr"], crossed=True)
        # micro-/macro-F1 at the operating point the pipeline picks (calibrate_operating_point)
        re = sh["real"]
        op = calibrate_operating_point(sh["label_rows"].mean(0), micro_val_t=re["micro_f1_val_t"],
                                       macro_val_t=re["macro_f1_val_t"], micro_fixed=re["micro_f1"],
                                       threshold_val=re["threshold_val"])
        f1 = [f"{m}{t}" for m in ("micro_f1", "macro_f1") for t in ("", "_val_t")]
        run(ds, {**{k: k for k in f1}, **{k + "_rows": k + "_rows" for k in f1},
                 "threshold_val_score": "threshold_val"}, sim_f1_operating_point, n_rep,
            {"real_median_row": re, "validation_rows": sh["n_val"], "seeds": 5, "draws": args.ml_draws,
             "seed_score_corr": sh["seed_score_corr"], "mu_per_label": "a + b z (z: standardised log prevalence)",
             **{k: (np.round(v, 4).tolist() if isinstance(v, np.ndarray) else v) for k, v in op.items()},
             "label_rows": int(len(sh["label_rows"])), "tau": tau,
             "replicates": "crossed; per-label (stratified) law and whole rows (_rows)"},
            merge="operating_point", n_items=sh["n"], n_val=sh["n_val"], label_rows=sh["label_rows"],
            mu=op["mu"], grid=op["grid"], t_fixed=op["t_fixed"], tau=tau,
            rho=sh["seed_score_corr"], n_resamples=args.ml_draws)
    if want("finetune"):
        d = json.loads((ROOT / "reports" / "data" / "finetune" / "humaneval_dataset.json").read_text())
        fs = finetune_shapes(ROOT)
        for key, m in fs.items():
            split, metric = key.split("/")
            if args.keep and f"finetune/{key}" in detail:
                continue
            n_q, n_p = m.get("queries", d["splits"][f"test_{split}"]), d["problems_per_split"][f"test_{split}"]
            sizes = np.full(n_p, n_q // n_p)
            sizes[: n_q - sizes.sum()] += 1
            sd_item = 0.0 if m["binary"] else 1.0
            link = _link_for(m["mean"], float(np.sqrt(1.0 + m["tau"] ** 2 + sd_item ** 2)))
            run(f"finetune/{split}/{metric}", {f"{split}_{metric}": "value"}, sim_clustered,
                args.reps, {"problems": n_p, "queries": n_q, "seeds": 3, "draws": args.draws,
                            "mean": m["mean"], "problem_sd_logit": 1.0, "query_sd_logit": sd_item,
                            "seed_sd_logit": m["tau"], "replicates": "crossed"},
                sizes=sizes.tolist(), n_seeds=3, link=link, sigma=1.0, tau=m["tau"], sd_item=sd_item,
                binary=m["binary"], n_resamples=args.draws, crossed=True)
    if want("delta"):  # the README answer's differences, at the committed per-item data
        for key, e in answer_deltas(ROOT).items():
            run(f"delta/{key}", {key: "value"}, sim_empirical_delta, args.reps,
                {"rows": list(e["rows"]), "seeds": int(e["diff"].shape[0]), "items": int(e["diff"].shape[1]),
                 "clusters": None if e["clusters"] is None else int(len(np.unique(e["clusters"]))),
                 "draws": args.draws,
                 "population": "the committed per-item differences (empirical), test sets redrawn by cluster"},
                diff=e["diff"], clusters=e["clusters"], n_resamples=args.draws, crossed=e.get("crossed", False))
    # per multi-label set, the report's k: the smallest whose mAP interval covers >= LO there
    k_report: dict[str, int | None] = {}
    for ds in ml_sets:
        if ds in detail:
            ok = [k for k in args.min_pos
                  if LO <= detail[ds]["metrics"].get(f"map_min{k}pos", {}).get("coverage", 0) <= HI]
            k_report[ds] = min(ok) if ok else None
    out: dict[str, dict[str, float]] = {}
    for name, e in detail.items():
        if name.startswith("_"):
            continue
        if "/" in name:  # code/<metric>, finetune/<split>/<metric>
            group = name.split("/")[0]
            out.setdefault(group, {}).update({m: round(v["coverage"], 4) for m, v in e["metrics"].items()})
            continue
        k, ms = k_report.get(name), e["metrics"]
        op = e["settings"].get("operating_point")
        if name not in k_report:  # graph
            out[name] = {m: round(v["coverage"], 4) for m, v in ms.items()}
            continue
        # the law the report's replicates use (per label), for an F1 whose simulated value is
        # within F1_TOL of the real median row's (else it was not simulated at its operating
        # point: no entry, °); the report's mAP (frequent labels) and the all-label mAP ("map");
        # the whole-row law in the detail. The ° rule reads these (reporting/coverage_rule.py).
        out[name] = {m: round(v["coverage"], 4) for m, v in ms.items()
                     if (k is not None and m == f"map_min{k}pos") or (
                         op and m in op["real_median_row"] and abs(v["estimate"] - op["real_median_row"][m]) <= F1_TOL)}
        if "map_min1pos" in ms:
            out[name]["map"] = round(ms["map_min1pos"]["coverage"], 4)
        if op:
            out.setdefault("_operating_point", {})[name] = {
                "threshold_rule": "per seed, the pipeline's choose_threshold (the grid threshold maximising "
                                  "the mean of validation micro- and macro-F1 averaged with its two grid "
                                  "neighbours) on a simulated validation split of the real size",
                "real_median_row": op["real_median_row"], "seed_score_corr": op["seed_score_corr"],
                "mu_a": round(op["a"], 4), "mu_b": round(op["b"], 4), "t_fixed": round(op["t_fixed"], 4),
                "t_opt": round(op["t_opt"], 4),
                "simulated_mean": {m: round(ms[m]["estimate"], 4) for m in ms
                                   if m.endswith("f1") or m.endswith("val_t")},
                # the mean chosen validation threshold, on the pipeline's probability scale
                "simulated_threshold_val": round(float(expit(
                    (ms["threshold_val_score"]["estimate"] - op["t_fixed"]) * op["slope"])), 3),
                "coverage_whole_rows": {m[:-5]: round(v["coverage"], 4) for m, v in ms.items()
                                        if m.endswith("_rows")}}
    detail["_summary"] = {"map_min_positives": k_report, "interval": "BC percentile (BCa, a = 0)",
                          "target": [LO, HI], "seed": args.seed}
    for path, obj in ((detail_path, detail), (args.json, out)):
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")
    print(markdown_table(detail))
    print(f"mAP (frequent labels) per set, labels with >= k test positives: {k_report}; wrote {args.json}")
    bad = {f"{s}.{m}": c for s, d in out.items() if not s.startswith("_")
           for m, c in d.items() if not LO <= c <= HI}
    print("outside [0.92, 0.98]: " + (", ".join(f"{k} {v:.3f}" for k, v in bad.items()) or "none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
