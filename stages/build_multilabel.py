"""DVC stage ``build_multilabel@<dataset>``: one multi-label data set as train/val/test tensors
(MULAN, user data sets, Reuters, HumanEval; steps: :mod:`contrastlab.data.multilabel_build`).
Writes ``data/multilabel/<dataset>/data.safetensors``, ``meta.json`` and
``reports/data/multilabel/<dataset>_dataset.json`` (statistics for the report).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.data.multilabel_build import build_dataset
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--out", "--report-dir")
    ap.add_argument("--dataset", required=True)
    args = ap.parse_args(argv)
    build_dataset(load_params(args.params), args.dataset, args.out, args.report_dir, args.params)
    return 0


if __name__ == "__main__":
    run(main)
