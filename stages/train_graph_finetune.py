"""DVC stage ``train_graph_finetune@<name>``: the tuned choice of a fine-tuning row of
``graph.finetune`` on every seed of ``graph.final.seeds`` (seed s fine-tunes the pre-training
variant's seed-s encoder), scored once on the test nodes
(:func:`contrastlab.training.graph_finetune.run_finetune_final`). Writes
``reports/metrics/graph/supervised/<name>.json`` and
``reports/data/graph/supervised/<name>_test_pred.csv``.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.graph_finetune import run_finetune_final


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--tuned", "--metrics", "--report-data")
    ap.add_argument("--name", required=True, help="a key of graph.finetune")
    ap.add_argument("--ssl-tuned", required=True, help="folder of tune_graph's choices (the "
                    "pre-training variant's)")
    args = ap.parse_args(argv)
    m = run_finetune_final(load_params(args.params).graph, args.name, data_path=args.data,
                           tuned_dir=args.tuned, metrics_dir=args.metrics,
                           report_data_dir=args.report_data, ssl_tuned_dir=args.ssl_tuned)
    print(f"{args.name}: test acc {m['logreg_acc_mean']:.4f} [{m['logreg_acc_ci_low']:.4f}, "
          f"{m['logreg_acc_ci_high']:.4f}] over {m['n_seeds']} seeds", flush=True)
    return 0


if __name__ == "__main__":
    run(main)
