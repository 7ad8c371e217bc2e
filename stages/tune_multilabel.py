"""DVC stage ``tune_multilabel@<variant>``: the equal-budget Optuna search of one multi-label
variant, one study per data set of ``multilabel.tune.datasets`` (protocol, objective and
outputs: :mod:`contrastlab.training.multilabel_tune`). Writes
``reports/tuned/multilabel/<variant>.json``, ``reports/plots/tune/multilabel/<variant>.csv``
and the study journal under ``reports/tune/multilabel/<variant>/``. ``--only <d>`` runs the
study of one data set (a partial run).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.multilabel_tune import run_tuning


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data-dir", "--tuned-dir", "--plots-dir", "--study-dir")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--only", default=None, help="tune this data set of tune.datasets only")
    args = ap.parse_args(argv)
    run_tuning(load_params(args.params).multilabel, args.variant, args.only, args.data_dir,
               args.tuned_dir, args.plots_dir, args.study_dir, args.params)
    return 0


if __name__ == "__main__":
    run(main)
