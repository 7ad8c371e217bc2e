"""Statistics for a loss comparison a reviewer accepts (Musgrave, Belongie & Lim, "A Metric
Learning Reality Check", ECCV 2020): confidence intervals, paired tests against the best row
and against a baseline with a multiplicity correction, and a rank test across data sets.

Everything is a nonparametric bootstrap over the two sources of noise a comparison has: the
test items (nodes, queries, samples; optionally resampled by cluster, e.g. queries grouped by
repository) and the training seeds (Efron & Tibshirani, "An Introduction to the Bootstrap",
1993; the two-level scheme resamples seeds and items independently). All methods of one table
are evaluated on the *same* bootstrap draws, so a difference between two methods is a paired
statistic (the paired bootstrap of Koehn, EMNLP 2004).

- :func:`resample_counts` draws the shared resamples.
- :func:`bootstrap_per_item` gives point estimates and replicates for metrics that are means
  of per-item scores (accuracy, reciprocal rank, hit@k), vectorised.
- For other metrics (macro-F1, mAP) compute the metric on every draw of
  :func:`resample_counts` yourself.
- :mod:`contrastlab.evaluation.stats_crossed` gives the same draws' replicates with the
  seed x item interaction counted once instead of twice (Owen, Ann. Appl. Stat. 2007): the
  multi-label and fine-tuning tables use it.
- :func:`summarize` turns point estimates and replicates into the table: mean, 95% CI
  (:func:`bias_corrected_interval`), the probability of being best across draws, the Model
  Confidence Set that decides "tied for best" with the selection accounted for
  (:func:`model_confidence_set`; Hansen, Lunde & Nason, Econometrica 2011), and paired tests
  against a baseline in both directions, Holm-corrected (Holm, Scand. J. Statist. 1979).
- :func:`friedman_nemenyi` / :func:`plot_cd`: Friedman test and Nemenyi critical difference
  across data sets (Demsar, JMLR 2006, Sec. 3.2.2).

The code lives in four modules, re-exported here: ``stats_resample`` (draws, per-item
bootstrap), ``stats_tests`` (p-values, draws, their display, Holm, intervals),
``stats_summary`` (best, MCS, :func:`summarize`) and ``stats_ranks``
(Friedman / Nemenyi).
"""


from __future__ import annotations

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
           "friedman_nemenyi", "plot_cd"]
