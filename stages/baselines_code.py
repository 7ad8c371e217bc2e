"""DVC stage ``baselines_code``: the untrained code-retrieval rows (zero-shot teacher raw and
centred, ridge, the teacher's sentence embedding, BM25), evaluated exactly like the trained
variants (rows and sources: :mod:`contrastlab.evaluation.code_baselines`). Writes
``reports/metrics/code/baselines.json`` (metrics per row, the validation-chosen lambda and
(k1, b) with every grid point's validation score) and ``reports/data/code/baselines_ranks.csv``
(``id, repo, baseline, rank``).
"""

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.evaluation.code_baselines import run_all
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--functions", "--splits", "--teacher", "--metrics", "--ranks")
    args = ap.parse_args(argv)
    out, ranks = run_all(load_params(args.params).code, args.functions, args.splits, args.teacher)
    write_json(args.metrics, out)
    write_csv(args.ranks, ranks)
    for k, m in out["baselines"].items():
        print(f"baselines_code: {k:17s} test R@1 {m['rank_at_1']:.2%} R@10 {m['rank_at_10']:.2%} "
              f"MRR {m['mrr']:.4f}")
    return 0


if __name__ == "__main__":
    run(main)
