"""DVC stage ``tune_graph@<variant>``: an equal-budget Optuna study on the validation nodes
(protocol and outputs: :func:`contrastlab.training.graph_tune.run_tuning`). Writes
``reports/tune/graph/<variant>/journal.log``, ``reports/tuned/graph/<variant>.json`` and
``reports/plots/tune/graph/<variant>.csv``.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.graph_tune import run_tuning


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--study-dir", "--tuned", "--plots")
    ap.add_argument("--variant", required=True)
    args = ap.parse_args(argv)
    res = run_tuning(load_params(args.params).graph, args.variant, args.data, args.study_dir,
                     args.tuned, args.plots)
    print(f"tune_graph@{args.variant}: best val acc {res.best_value:.4f} "
          f"(trial {res.best_trial}, {res.n_complete} complete, {res.n_failed} failed): "
          f"{res.best_params}", flush=True)
    return 0


if __name__ == "__main__":
    run(main)
