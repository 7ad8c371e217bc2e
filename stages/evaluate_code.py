"""DVC stage ``evaluate_code@<variant>``: test signatures against the corpus of all bodies.

Every seed's checkpoint is evaluated with the same FAISS ranking as the baselines
(``baselines_code``): queries = test signatures, corpus = every extracted body in the
target space (fitted on training bodies). Writes ``reports/metrics/code/<V>.json``
(per-seed and mean Rank@1/5/10, MRR, median rank, mean cosine, corpus size, best epochs,
validation Rank@10, tuned hyperparameters; no wall times), the per-query ranks
``reports/data/code/<V>_ranks.csv`` (``id, repo, seed, rank``: the bootstrap's input) and
the mean Rank@k curve ``reports/data/code/<V>_rank_curve.csv``. MLflow: the test metrics go
to the variant's one run (opened by ``train_code@<V>``, found again by its params) and to
each seed's nested run, next to the variant's loss, temperature and learning rate.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab.cli import run_stage
from contrastlab.evaluation.retrieval import build_index, rank_at_k_curve, rank_metrics, true_ranks
from contrastlab.io import read_json, write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import variant_run
from contrastlab.training.code import checkpoint_path, load_student, predict, prepare_targets
from contrastlab.utils import pick_device, set_cpu_threads
from contrastlab.training.code_inputs import load_code_data, run_params



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--models", default="data/code/models")
    ap.add_argument("--metrics", default="reports/metrics/code")
    ap.add_argument("--curves", default="reports/data/code")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    set_cpu_threads(code.train.threads)
    data, _ = load_code_data(args.functions, args.splits, args.teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    models = Path(args.models) / args.variant
    summary = read_json(models / "summary.json")
    dev = pick_device(code.evaluate.device)
    test = data.rows("test")
    index = build_index(targets.corpus, code.evaluate.device)
    per_seed, rank_rows, curves = [], [], []
    for s in summary["seeds"]:
        student = load_student(checkpoint_path(models, s["seed"]), dev)
        pred = predict(student, data, test, dev)
        ranks = true_ranks(pred, targets.corpus, test, code.evaluate.k_max, index=index)
        m = rank_metrics(ranks)
        m["mean_cosine"] = float((pred * targets.corpus[test]).sum(-1).mean())
        m.update(seed=int(s["seed"]), best_epoch=int(s["best_epoch"]),
                 epochs_run=int(s["epochs_run"]), val_rank_at_10=float(s["best_val_rank_at_10"]))
        per_seed.append(m)
        rank_rows.append(pd.DataFrame({"id": test, "repo": data.repo[test], "seed": s["seed"],
                                       "rank": ranks}))
        curves.append(rank_at_k_curve(ranks, code.evaluate.k_max))
    keys = ["rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank", "mean_cosine",
            "val_rank_at_10", "best_epoch"]
    out = {k: float(np.mean([m[k] for m in per_seed])) for k in keys}
    out.update(corpus_size=int(len(targets.corpus)), n_queries=int(len(test)),
               n_seeds=len(per_seed), chance_rank_at_10=10.0 / len(targets.corpus),
               loss=summary["loss"],
               lr=summary["lr"], temperature=summary["temperature"],
               residual=summary["residual"], tuned=summary["tuned"],
               centre=code.target.centre, per_seed=per_seed)
    write_json(Path(args.metrics) / f"{args.variant}.json", out)
    scalar = ("rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank", "mean_cosine")
    with variant_run("code", args.variant, run_params(args.variant, summary["loss"], summary),
                     stage=f"evaluate_code@{args.variant}") as tracker:
        tracker.log_metrics({f"test_{k}": out[k] for k in scalar})
        for m in per_seed:
            with tracker.seed_run(m["seed"]) as st:
                st.log_metrics({f"test_{k}": m[k] for k in scalar})
    write_csv(Path(args.curves) / f"{args.variant}_ranks.csv", pd.concat(rank_rows))
    curve = np.mean(curves, 0)
    write_csv(Path(args.curves) / f"{args.variant}_rank_curve.csv",
              pd.DataFrame({"k": np.arange(1, len(curve) + 1), "rank_at_k": curve}))
    print(f"evaluate_code@{args.variant}: test R@1 {out['rank_at_1']:.2%} "
          f"R@10 {out['rank_at_10']:.2%} MRR {out['mrr']:.4f} over {len(per_seed)} seeds "
          f"({out['n_queries']} queries, corpus {out['corpus_size']})")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
