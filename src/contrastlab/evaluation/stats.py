"""Statistics for a loss comparison a reviewer accepts (Musgrave, Belongie & Lim, "A Metric
Learning Reality Check", ECCV 2020): confidence intervals, paired tests against the best row
and a baseline with a multiplicity correction, and a rank test across data sets.

A nonparametric bootstrap over test items (optionally by cluster) and training seeds (Efron &
Tibshirani 1993), the same draws for every method of a table, so differences are paired
(Koehn, EMNLP 2004). :func:`resample_counts` draws; :func:`bootstrap_per_item` gives estimates
and replicates of per-item means (other metrics: compute them on every draw);
:mod:`contrastlab.evaluation.stats_crossed` counts the seed x item interaction once (Owen,
Ann. Appl. Stat. 2007). :func:`summarize`: mean, 95% CI (:func:`bias_corrected_interval`),
probability of being best, the Model Confidence Set (:func:`model_confidence_set`; Hansen,
Lunde & Nason, Econometrica 2011) and Holm-corrected paired tests against a baseline (Holm
1979). :func:`friedman_nemenyi` / :func:`plot_cd`: Friedman test and Nemenyi critical
difference (Demsar, JMLR 2006, Sec. 3.2.2). Re-exported from ``stats_resample``,
``stats_tests``, ``stats_summary`` and ``stats_ranks``.
"""

from __future__ import annotations

import numpy as np

from .stats_ranks import friedman_nemenyi, plot_cd
from .stats_resample import Counts, bootstrap_per_item, resample_counts
from .stats_summary import model_confidence_set, prob_best, summarize
from .stats_tests import (MAX_DRAWS, baseline_p, bias_corrected_interval, draws_for, format_p,
                          holm, holm_unstable, paired_pvalue, pvalue_floor, resolution_note,
                          settle_draws, table_resolution)

__all__ = ["resample_counts", "Counts", "bootstrap_per_item", "paired_pvalue",
           "holm", "summarize", "draws_for", "pvalue_floor", "holm_unstable", "settle_draws",
           "format_p", "baseline_p", "MAX_DRAWS", "resolution_note",
           "table_resolution", "bias_corrected_interval", "model_confidence_set", "prob_best",
           "friedman_nemenyi", "plot_cd", "accuracy_summary"]


def accuracy_summary(correct: np.ndarray, prefix: str = "logreg_acc") -> dict[str, float]:
    """Mean test accuracy over seeds and its bias-corrected 95 % CI from 2,000 draws (seed 0) of
    the per-item bootstrap over seeds and test items (:func:`bootstrap_per_item`,
    :func:`summarize`): the summary every graph row's metrics carry.

    Args:
        correct: ``(n_seeds, n_items)`` float array, 1.0 where a seed's prediction is right.
        prefix: the keys' prefix.

    Returns:
        ``{"<prefix>_mean", "<prefix>_ci_low", "<prefix>_ci_high"}``, fractions in [0, 1].
    """
    point, reps = bootstrap_per_item({prefix: correct}, n_resamples=2000, seed=0)
    st = summarize(point, reps)[prefix]
    return {f"{prefix}_mean": st["mean"], f"{prefix}_ci_low": st["ci_low"],
            f"{prefix}_ci_high": st["ci_high"]}
