"""DVC stage ``hybrid_code``: BM25 fused with each trained predictor, evaluated like the variants.

For every variant in ``code.variants`` and every seed's checkpoint (``data/code/models/<V>``):

- ``rrf_<V>``: reciprocal-rank fusion of the BM25 ranking (the ``(k1, b)`` chosen on the
  validation repositories by ``baselines_code``) and the predictor's cosine ranking over the
  whole corpus, ``RRF(d) = 1/(k + r_bm25(d)) + 1/(k + r_dense(d))`` with ``k =
  code.baselines.rrf_k`` (Cormack, Clarke & Buettcher, SIGIR 2009, Eq. 1; no tuning);
- ``fusion_<V>``: ``w z(bm25) + (1 - w) z(cosine)`` with per-query z-scores over the corpus;
  ``w`` from ``code.baselines.fusion_weights`` picked on the validation repositories only by
  ``pick_on_grid`` (validation MRR averaged over seeds; the centre of the plateau of weights
  within 1 % of the validation queries of the best; the pick's margin in validation items
  and a ``fragile`` flag under 1 % recorded as ``pick``), then applied once to the test
  signatures. The untrained control (``fusion_sentence``) is picked by the same rule and is
  also evaluated on the test signatures at every grid weight (``test_by_weight``), so that
  each trained fusion is compared with the control at its own weight.

Ranks count ties against the true body (``ranks_from_scores``). Writes
``reports/metrics/code/hybrids.json`` (per hybrid: mean and per-seed Rank@1/5/10, MRR,
median rank, the weight, its pick record and its validation grid) and
``reports/data/code/hybrids_ranks.csv`` (``id, repo, hybrid, seed, rank``; the control at
weight ``w`` as hybrid ``fusion_sentence@w<w>``).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.evaluation.code_hybrids import run_hybrids
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--functions", "--splits", "--teacher", "--models", "--baselines", "--metrics", "--ranks")
    args = ap.parse_args(argv)
    metrics, ranks = run_hybrids(load_params(args.params).code, args.baselines, args.models,
                                 args.functions, args.splits, args.teacher)
    write_json(args.metrics, metrics)
    write_csv(args.ranks, ranks)
    return 0


if __name__ == "__main__":
    run(main)
