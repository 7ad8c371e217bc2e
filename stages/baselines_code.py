"""DVC stage ``baselines_code``: the untrained code-retrieval rows (zero-shot teacher raw and
centred, ridge, the teacher's sentence embedding, BM25), evaluated exactly like the trained
variants (rows and sources: :mod:`contrastlab.evaluation.code_baselines`). Writes
``reports/metrics/code/baselines.json`` (metrics per row, the validation-chosen lambda and
(k1, b) with every grid point's validation score) and ``reports/data/code/baselines_ranks.csv``
(``id, repo, baseline, rank``).
"""

from __future__ import annotations

import argparse
import sys

from contrastlab.cli import run_stage
from contrastlab.evaluation.code_baselines import run_all
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.training.code_inputs import add_input_args


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    add_input_args(ap)
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
