"""DVC stage ``train_graph_supervised@<name>``: the tuned choice of a supervised reference of
``graph.supervised`` trained on every seed of ``graph.final.seeds`` and scored once on the
test nodes (:func:`contrastlab.training.graph_supervised.run_supervised_final`). Writes
``reports/metrics/graph/supervised/<name>.json`` and
``reports/data/graph/supervised/<name>_test_pred.csv``.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.graph_supervised import run_supervised_final


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--tuned", "--metrics", "--report-data")
    ap.add_argument("--name", required=True, help="a key of graph.supervised")
    args = ap.parse_args(argv)
    m = run_supervised_final(load_params(args.params).graph, args.name, data_path=args.data,
                             tuned_dir=args.tuned, metrics_dir=args.metrics,
                             report_data_dir=args.report_data)
    print(f"{args.name}: test acc {m['logreg_acc_mean']:.4f} [{m['logreg_acc_ci_low']:.4f}, "
          f"{m['logreg_acc_ci_high']:.4f}] over {m['n_seeds']} seeds", flush=True)
    return 0


if __name__ == "__main__":
    run(main)
