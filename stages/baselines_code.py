"""DVC stage ``baselines_code``: untrained baselines, evaluated exactly like the variants.

Same corpus (every extracted body), same test signatures, same FAISS ranking as
``evaluate_code``. Rows (``contrastlab.models.code_baselines``):

- ``zeroshot_raw``: masked mean of the signature's teacher states vs the raw body embedding;
- ``zeroshot_centred``: both centred (and whitened with ``code.target.centre: whiten``) on
  the training functions;
- ``ridge``: closed-form ridge from the centred pooled signature states to the target-space
  body, lambda chosen on the validation repositories (Rank@10, then MRR);
- ``zeroshot_centred_l<L>`` for each ``code.baselines.zeroshot_layers`` entry: the centred
  zero-shot row with the teacher read at layer ``L`` instead of ``code.teacher.layer``
  (same truncation; the teacher layer as an ablated knob);
- ``sentence``: the teacher's own sentence embedding as its authors use it (all layers,
  masked mean pooling over every token, L2-normalised, up to
  ``code.baselines.sentence_max_tokens`` tokens; for all-MiniLM-L6-v2 that is the
  sentence-transformers model, Reimers & Gurevych 2019), signature vs body, raw space;
- ``bm25``: BM25 over identifier sub-tokens (``identifier_tokens``), query = signature,
  documents = bodies, ``(k1, b)`` from the ``code.baselines.bm25_k1 x bm25_b`` grid chosen
  on the validation repositories (Rank@10, then MRR). Ties are broken against the true body.

Writes ``reports/metrics/code/baselines.json`` (metrics per baseline, chosen lambda and
(k1, b), the validation scores of every grid point) and
``reports/data/code/baselines_ranks.csv`` (``id, repo, baseline, rank``).
"""

from __future__ import annotations

import argparse
import sys

from contrastlab.cli import run_stage
from contrastlab.evaluation.code_baselines import run_all
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--metrics", default="reports/metrics/code/baselines.json")
    ap.add_argument("--ranks", default="reports/data/code/baselines_ranks.csv")
    args = ap.parse_args(argv)
    out, ranks = run_all(load_params(args.params).code, args.functions, args.splits, args.teacher)
    write_json(args.metrics, out)
    write_csv(args.ranks, ranks)
    for k, m in out["baselines"].items():
        print(f"baselines_code: {k:17s} test R@1 {m['rank_at_1']:.2%} R@10 {m['rank_at_10']:.2%} "
              f"MRR {m['mrr']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
