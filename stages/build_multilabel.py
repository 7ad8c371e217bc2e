"""DVC stage ``build_multilabel@<dataset>``: one multi-label data set as train/val/test tensors.

MULAN sets: ARFF + XML -> (optional seeded train subsample) -> validation split carved from
the training set by iterative stratification (``multilabel.train.val_fraction``,
``split_seed``) -> z-scored features (mean/std of the training part).
User data sets (``multilabel.custom.<name>``): ARFF + label XML or CSV/Parquet, same path.
``reuters``: ModApte 90 categories from the raw SGML -> frozen teacher mean states.
``humaneval``: canonical + AST-mutant variants, tiered by sandboxed execution of each
assertion -> frozen teacher mean states of the variant source; per-assertion results are
kept in ``tiers.parquet``.

Outputs: ``data/multilabel/<dataset>/data.safetensors`` (x_train, y_train, x_test, y_test,
and g_train/g_test group ids for humaneval), ``meta.json`` (label names, statistics) and
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
