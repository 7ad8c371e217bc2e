"""DVC stages ``train_multilabel@<dataset>-<variant>`` and ``train_multilabel_hybrid@<dataset>-<hybrid>``:
final runs of one tuned variant (protocol, files and MLflow runs:
:mod:`contrastlab.training.multilabel_final`). Writes ``reports/metrics/multilabel/<dataset>_<variant>.json``,
``reports/metrics/multilabel/reps/<dataset>_<variant>.npz`` and ``reports/plots/multilabel/<dataset>_<variant>.csv``.
With ``--default`` (stage ``default_multilabel@<dataset>``): the params.yaml values (trial 0 of
each study) instead of the tuned choices, for one ``--loss`` or all of them, into the folders
the cmd names.
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.params import load_params
from contrastlab.training.multilabel_final import FinalPaths, run_final


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data-dir", "--metrics-dir", "--plots-dir")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--loss", help="the variant name (multilabel.losses); with --default and no "
                    "--loss, every variant in turn (stage default_multilabel@<dataset>)")
    ap.add_argument("--tuned-dir", help="folder of tune_multilabel's choices (required unless --default)")
    ap.add_argument("--default", action="store_true", help="params.yaml values, not the tuned choices")
    args = ap.parse_args(argv)
    if not args.default and (args.tuned_dir is None or args.loss is None):
        ap.error("--tuned-dir and --loss are required (except with --default)")
    paths = FinalPaths(args.params, args.data_dir, args.tuned_dir, args.metrics_dir, args.plots_dir)
    ml = load_params(args.params).multilabel
    for v in [args.loss] if args.loss else ml.losses:
        run_final(ml, args.dataset, v, paths, default=args.default)
    return 0


if __name__ == "__main__":
    run(main)
