"""DVC stage ``tune_multilabel@<variant>``: equal-budget Optuna search for one model variant,
one study per data set in ``multilabel.tune.datasets``.

Objective of a trial on data set ``d`` (``contrastlab.training.multilabel.cv_objective``): the
mean validation mAP over ``multilabel.tune.folds`` iterative-stratification folds (Sechidis et
al. 2011) of ``d``'s training part (its train + validation rows; the test split is never
read), fold ``f`` trained with seed ``tune.run_seeds[f]`` (disjoint from the final seeds,
checked by the params schema); its standard error over folds is recorded beside it. Every
variant gets ``tune.trials`` finished trials per data set over the search space declared
beside it in ``params.yaml`` (``multilabel.variants.<variant>.search``: temperature, learning
rate, masking rate, queue size for the losses; depth, feature fraction and leaf size for the
forests; k, weighting and metric for kNN); trial 0 is the variant's ``params.yaml`` values
(the values used on the data sets not tuned). The sampler seed is ``tune.seed`` offset by a
hash of (variant, data set); a variant in ``tune.seed_alias`` uses its alias's seed
(``simdis_eq13`` -> ``any``: the same gradient, so the same configurations are drawn). A variant without a search space (``logreg``, whose C is picked
on validation inside every run) gets a JSON with no params and no study.

Outputs: ``reports/tuned/multilabel/<variant>.json`` (``datasets.<d>.params``: the choices
``train_multilabel`` uses on ``d``; a data set not listed uses the ``params.yaml`` values),
``reports/plots/tune/multilabel/<variant>.csv`` (trial history, column ``dataset``),
``reports/tune/multilabel/<variant>/journal.log`` (the Optuna studies; persist, committed so a
fresh clone does not retune and an interrupted run continues) and, beside it,
``fold_se.json`` (each trial's standard error over folds, keyed by its choices).

``--only <d>`` runs the study of ``d`` alone and writes the JSON with the data sets whose
studies are complete (a partial run; the DVC command runs every data set).
"""

from __future__ import annotations

import argparse
import sys

from contrastlab.cli import run_stage
from contrastlab.params import load_params
from contrastlab.training.multilabel_tune import run_tuning


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--only", default=None, help="tune this data set of tune.datasets only")
    ap.add_argument("--data-dir", default="data/multilabel")
    ap.add_argument("--tuned-dir", default="reports/tuned/multilabel")
    ap.add_argument("--plots-dir", default="reports/plots/tune/multilabel")
    ap.add_argument("--study-dir", default="reports/tune/multilabel")
    args = ap.parse_args(argv)
    run_tuning(load_params(args.params).multilabel, args.variant, args.only, args.data_dir,
               args.tuned_dir, args.plots_dir, args.study_dir, args.params)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
