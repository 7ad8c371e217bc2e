"""DVC stage ``build_multilabel@<dataset>``: one multi-label data set as train/val/test tensors
(MULAN, user data sets, Reuters, HumanEval; steps: :mod:`contrastlab.data.multilabel_build`).
Writes ``data/multilabel/<dataset>/data.safetensors``, ``meta.json`` and
``reports/data/multilabel/<dataset>_dataset.json`` (statistics for the report).
"""

from __future__ import annotations

import argparse
import sys

from contrastlab.cli import run_stage
from contrastlab.data.multilabel_build import build_dataset
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default=None, help="default: data/multilabel/<dataset>")
    ap.add_argument("--report-dir", default="reports/data/multilabel")
    args = ap.parse_args(argv)
    build_dataset(load_params(args.params), args.dataset, args.out, args.report_dir, args.params)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
