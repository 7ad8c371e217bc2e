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

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab.cli import run_stage, stage_parser
from contrastlab.evaluation.code_eval import evaluate_variant
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.tracking import variant_run
from contrastlab.training.code_inputs import run_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--splits", "--teacher", "--models", "--metrics", "--curves")
    ap.add_argument("--variant", required=True)
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    out, per_seed, ranks, curve = evaluate_variant(code, Path(args.models) / args.variant,
                                                   args.splits, args.teacher)
    write_json(Path(args.metrics) / f"{args.variant}.json", out)
    scalar = ("rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank", "mean_cosine")
    with variant_run("code", args.variant, run_params(args.variant, out["loss"], out),
                     stage=f"evaluate_code@{args.variant}") as tracker:
        tracker.log_metrics({f"test_{k}": out[k] for k in scalar})
        for m in per_seed:
            with tracker.seed_run(m["seed"]) as st:
                st.log_metrics({f"test_{k}": m[k] for k in scalar})
    write_csv(Path(args.curves) / f"{args.variant}_ranks.csv", ranks)
    write_csv(Path(args.curves) / f"{args.variant}_rank_curve.csv",
              pd.DataFrame({"k": np.arange(1, len(curve) + 1), "rank_at_k": curve}))
    print(f"evaluate_code@{args.variant}: test R@1 {out['rank_at_1']:.2%} "
          f"R@10 {out['rank_at_10']:.2%} MRR {out['mrr']:.4f} over {len(per_seed)} seeds "
          f"({out['n_queries']} queries, corpus {out['corpus_size']})")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
