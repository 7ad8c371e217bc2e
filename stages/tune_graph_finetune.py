"""DVC stage ``tune_graph_finetune@<name>``: the Optuna study of one fine-tuning row of
``graph.finetune`` (a variant's tuned encoder fine-tuned on the training labels), with the
supervised references' budget, pruner and seeds
(:func:`contrastlab.training.graph_finetune.run_finetune_tuning`). Writes
``reports/tune/graph/supervised/<name>/journal.log``, ``reports/tuned/graph/supervised/<name>.json``
and ``reports/plots/tune/graph/supervised/<name>.csv``.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.graph_finetune import run_finetune_tuning


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--study-dir", "--tuned", "--plots")
    ap.add_argument("--name", required=True, help="a key of graph.finetune")
    ap.add_argument("--ssl-tuned", required=True, help="folder of tune_graph's choices (the "
                    "pre-training variant's)")
    args = ap.parse_args(argv)
    res = run_finetune_tuning(load_params(args.params).graph, args.name, args.data,
                              args.study_dir, args.tuned, args.plots, args.ssl_tuned)
    print(f"tune_graph_finetune@{args.name}: best val acc {res.best_value:.4f} "
          f"(trial {res.best_trial}, {res.n_complete} complete, {res.n_failed} failed): "
          f"{res.best_params}", flush=True)
    return 0


if __name__ == "__main__":
    run(main)
