"""DVC stage ``hybrid_biencoder``: BM25 fused with every fine-tuned bi-encoder row, exactly as
``hybrid_code`` fuses the trained predictors (:func:`contrastlab.evaluation.code_hybrids.
fuse_with_bm25`): reciprocal-rank fusion (Cormack, Clarke & Buettcher 2009, Eq. 1, k =
``code.baselines.rrf_k``) and ``w z(bm25) + (1 - w) z(cosine)`` with ``w`` picked on the
validation repositories by the same rule as ``hybrid_code``'s (``pick_on_grid``: validation MRR
averaged over seeds, the centre of the plateau within 1 % of the validation queries of the best,
the margin recorded), per seed of each row; BM25's ``k1, b`` are ``baselines_code``'s
validation choice. The report compares each of these fusions with ``hybrid_code``'s untrained
control evaluated at the same weight.

Outputs: ``reports/metrics/code/hybrids_biencoder.json`` and
``reports/data/code/hybrids_biencoder_ranks.csv`` (``id, repo, hybrid, seed, rank``).
"""

from pathlib import Path

import pandas as pd
from safetensors.torch import load_file

from _dvc import run

from contrastlab.biencoder.data import load_pairs
from contrastlab.cli import stage_parser
from contrastlab.evaluation.code_hybrids import fuse_with_bm25
from contrastlab.io import read_json, write_csv, write_json
from contrastlab.losses.registry import method_row
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--functions", "--splits", "--models", "--baselines", "--metrics", "--ranks")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    pairs = load_pairs(args.functions, args.splits)
    va, te = pairs.rows("val"), pairs.rows("test")
    preds = {}
    for name in code.biencoder.rows:
        f = Path(args.models) / name / "embeddings.safetensors"
        if not f.exists():
            print(f"hybrid_biencoder: no embeddings for {name}; skipped")
            continue
        t = load_file(str(f))
        pos = {int(r): j for j, r in enumerate(t["sig_rows"].tolist())}
        iv, it = [pos[int(r)] for r in va], [pos[int(r)] for r in te]
        preds[name] = {int(s): (t["sig"][i][iv].numpy(), t["sig"][i][it].numpy(), t["body"][i].numpy())
                       for i, s in enumerate(t["seeds"].tolist())}
    bm = read_json(args.baselines)["baselines"][method_row("code", "lexical")]
    out, frames = fuse_with_bm25(code, bm, pairs.signatures, pairs.bodies, preds, va, te, pairs.repo)
    write_json(args.metrics, {"hybrids": out, "corpus_size": int(len(pairs.ids)), "n_queries": int(len(te))})
    write_csv(args.ranks, pd.concat(frames) if frames else
              pd.DataFrame(columns=["id", "repo", "hybrid", "seed", "rank"]))
    return 0


if __name__ == "__main__":
    run(main)
