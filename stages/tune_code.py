"""DVC stage ``tune_code@<variant>``: learning rate (and InfoNCE's initial temperature)
chosen on the validation repositories with the shared protocol (``contrastlab.tuning``).

Every variant gets the same budget (``code.tune.trials`` finished trials, Hyperband pruning);
trial 0 is the variant's declared configuration. A trial trains one run per seed of
``code.tune.seeds`` (disjoint from the final seeds) of at most ``code.tune.epochs`` epochs; its
objective is the mean over seeds of the best validation Rank@10 (with its standard error),
reported to the pruner after each seed. A variant with an empty search space (the
from-scratch ablations) is not tuned: its declared configuration is scored once the same
way and is the choice. Test functions are never read. Writes
``reports/tuned/code/<V>.json`` (read by ``train_code@<V>``), the trial history
``reports/plots/tune/code/<V>.csv`` and the study journal
``reports/tune/code/<V>/journal.log`` (resumes after an interruption).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.code_tune import run_tuning


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--splits", "--teacher", "--tuned", "--history", "--journal")
    ap.add_argument("--variant", required=True)
    args = ap.parse_args(argv)
    res = run_tuning(load_params(args.params).code, args.variant, args.splits,
                     args.teacher, args.tuned, args.history, args.journal)
    print(f"tune_code@{args.variant}: best val R@10 {res.best_value:.2%} with {res.best_params}")
    return 0


if __name__ == "__main__":
    run(main)
