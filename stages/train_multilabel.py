"""DVC stages ``train_multilabel@<dataset>-<variant>`` and ``train_multilabel_hybrid@<dataset>-<hybrid>``:
final runs of one tuned variant.

For every seed in ``multilabel.seeds`` (in ``multilabel.train.workers`` worker processes):
train with the tuned hyperparameters (``reports/tuned/multilabel/<variant>.json``, chosen on
validation by ``tune_multilabel@<variant>``: its ``datasets.<dataset>.params``, or the
variant's ``params.yaml`` values on a data set that was not tuned), early stopping and
thresholds on the validation split, then score the test split once. See
``contrastlab.training.multilabel``. ``knn`` is deterministic: it runs the first seed only
(its other seeds would repeat it; for the bootstrap its output stands for every seed). A hybrid (``hybrid_concat`` / ``hybrid_et``) reads the
choices of ``multilabel.hybrid_base`` and, for ``hybrid_et``, of ``extratrees``.

Outputs (all ``cache: false``, committed):
``reports/metrics/multilabel/<dataset>_<variant>.json`` (mean, ``_std`` and ``_seed<s>`` of
every metric, the tuned choices and where they come from, steps, the SHA-256 of every seed's
float32 test scores), ``reports/metrics/multilabel/reps/<dataset>_<variant>.npz``
(bootstrap replicates of micro/macro-F1 at 0.5 and at the validation threshold and of mAP from
``contrastlab.evaluation.multilabel.stratified_metric_reps(seed=0)``, whose draws depend only on
the test labels and the number of seeds, so all rows with as many seeds are paired: the
report's CIs and tests), ``reports/plots/multilabel/<dataset>_<variant>.csv`` (training loss and
validation mAP per check, per seed). Wall times go to stdout and MLflow only.

MLflow (``contrastlab.tracking.variant_run``, a side channel: no DVC output depends on it):
one run per (data set, variant) and pipeline invocation, named ``<dataset>-<variant> · <dvc
exp name or short commit>`` in ``contrastlab-multilabel``, whose params are the variant's
configuration (``loss``, ``temperature``, ``lr``, ``mask_rate``, ``queue``, ...; ``baseline``
true for logreg / bce), its tuned choices (``tuned.<name>``) and the seeds, and whose metrics
are the test metrics averaged over seeds (``map``, ``micro_f1``, ``macro_f1``,
``macro_f1_val_t``, ... with their ``_std``) plus the wall time ``time_s``; the data set
(``log_input``: name, SHA-256 prefix of ``data.safetensors`` + ``meta.json``, source folder);
the history CSV, the metrics JSON and a figure of the per-seed curves as artifacts; and one
nested run per seed (``... · seed <s>``) with its curve (``loss`` / ``val_map`` at each
validation check, step = training step; logreg: ``C`` / ``val_map`` per grid point) and its
test metrics.
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
