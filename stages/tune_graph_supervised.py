"""DVC stage ``tune_graph_supervised@<name>``: the Optuna study of a supervised reference of
``graph.supervised`` (a GCN or GAT trained on the 140 training labels) with the losses'
budget, pruner and tuning seeds, on the validation nodes (protocol:
:func:`contrastlab.training.graph_supervised.run_supervised_tuning`). Writes
``reports/tune/graph/supervised/<name>/journal.log``, ``reports/tuned/graph/supervised/<name>.json``
and ``reports/plots/tune/graph/supervised/<name>.csv``.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.graph_supervised import run_supervised_tuning


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--study-dir", "--tuned", "--plots")
    ap.add_argument("--name", required=True, help="a key of graph.supervised")
    args = ap.parse_args(argv)
    res = run_supervised_tuning(load_params(args.params).graph, args.name, args.data,
                                args.study_dir, args.tuned, args.plots)
    print(f"tune_graph_supervised@{args.name}: best val acc {res.best_value:.4f} "
          f"(trial {res.best_trial}, {res.n_complete} complete, {res.n_failed} failed): "
          f"{res.best_params}", flush=True)
    return 0


if __name__ == "__main__":
    run(main)
