"""DVC stages ``train_multilabel@<dataset>-<variant>`` and ``train_multilabel_hybrid@<dataset>-<hybrid>``:
final runs of one tuned variant (protocol, files and MLflow runs:
:mod:`contrastlab.training.multilabel_final`). Writes ``reports/metrics/multilabel/<dataset>_<variant>.json``,
``reports/metrics/multilabel/reps/<dataset>_<variant>.npz`` and ``reports/plots/multilabel/<dataset>_<variant>.csv``.
"""

from __future__ import annotations

import argparse
import sys

from contrastlab.cli import run_stage
from contrastlab.params import load_params
from contrastlab.training.multilabel_final import FinalPaths, run_final


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--loss", required=True, help="the variant name (multilabel.losses)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data-dir", default="data/multilabel")
    ap.add_argument("--tuned-dir", default="reports/tuned/multilabel")
    ap.add_argument("--metrics-dir", default="reports/metrics/multilabel")
    ap.add_argument("--plots-dir", default="reports/plots/multilabel")
    args = ap.parse_args(argv)
    paths = FinalPaths(args.params, args.data_dir, args.tuned_dir, args.metrics_dir, args.plots_dir)
    run_final(load_params(args.params).multilabel, args.dataset, args.loss, paths)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
