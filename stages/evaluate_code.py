"""DVC stage ``evaluate_code@<variant>``: test signatures against the corpus of all bodies.

Every seed's checkpoint is evaluated (:func:`contrastlab.training.code_final.run_evaluation`)
with the same FAISS ranking as the baselines
(``baselines_code``): queries = test signatures, corpus = every extracted body in the
target space (fitted on training bodies). Writes ``reports/metrics/code/<V>.json``
(per-seed and mean Rank@1/5/10, MRR, median rank, mean cosine, corpus size, best epochs,
validation Rank@10, tuned hyperparameters, the early-stopping epochs' margins read from
``--history``, train_code's per-epoch CSV; no wall times), the per-query ranks
``reports/data/code/<V>_ranks.csv`` (``id, repo, seed, rank``: the bootstrap's input) and
the mean Rank@k curve ``reports/data/code/<V>_rank_curve.csv``. MLflow: the test metrics go
to the variant's one run (opened by ``train_code@<V>``, found again by its params) and to
each seed's nested run, next to the variant's loss, temperature and learning rate.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.code_final import run_evaluation


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--splits", "--teacher", "--models", "--metrics", "--curves")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--history", help="train_code's per-epoch CSV (the early-stopping margins)")
    args = ap.parse_args(argv)
    out = run_evaluation(load_params(args.params).code, args.variant, args.splits, args.teacher,
                         args.models, args.metrics, args.curves, args.history)
    print(f"evaluate_code@{args.variant}: test R@1 {out['rank_at_1']:.2%} "
          f"R@10 {out['rank_at_10']:.2%} MRR {out['mrr']:.4f} over {out['n_seeds']} seeds "
          f"({out['n_queries']} queries, corpus {out['corpus_size']})")
    return 0


if __name__ == "__main__":
    run(main)
