"""DVC stage ``hybrid_code``: BM25 fused with each trained predictor, evaluated like the variants.

For every variant in ``code.variants`` and every seed's checkpoint (``data/code/models/<V>``):

- ``rrf_<V>``: reciprocal-rank fusion of the BM25 ranking (the ``(k1, b)`` chosen on the
  validation repositories by ``baselines_code``) and the predictor's cosine ranking over the
  whole corpus, ``RRF(d) = 1/(k + r_bm25(d)) + 1/(k + r_dense(d))`` with ``k =
  code.baselines.rrf_k`` (Cormack, Clarke & Buettcher, SIGIR 2009, Eq. 1; no tuning);
- ``fusion_<V>``: ``w z(bm25) + (1 - w) z(cosine)`` with per-query z-scores over the corpus;
  ``w`` from ``code.baselines.fusion_weights`` chosen on the validation repositories only
  (Rank@10 averaged over seeds, ties: MRR, then the smaller weight), then applied once to
  the test signatures.

Ranks count ties against the true body (``ranks_from_scores``). Writes
``reports/metrics/code/hybrids.json`` (per hybrid: mean and per-seed Rank@1/5/10, MRR,
median rank, the weight and its validation grid) and ``reports/data/code/hybrids_ranks.csv``
(``id, repo, hybrid, seed, rank``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab.cli import run_stage
from contrastlab.evaluation.retrieval import rank_metrics
from contrastlab.io import read_json, write_csv, write_json
from contrastlab.models.code_baselines import (BM25Scorer, competition_ranks, fit_fusion_weight,
                                               fuse_scores, ranks_from_scores, rrf_scores)
from contrastlab.params import load_params
from contrastlab.training.code import checkpoint_path, load_student, predict, prepare_targets
from contrastlab.utils import pick_device, set_cpu_threads
from contrastlab.training.code_inputs import load_code_data, load_code_texts


KEYS = ("rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--models", default="data/code/models")
    ap.add_argument("--baselines", default="reports/metrics/code/baselines.json")
    ap.add_argument("--metrics", default="reports/metrics/code/hybrids.json")
    ap.add_argument("--ranks", default="reports/data/code/hybrids_ranks.csv")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    set_cpu_threads(code.train.threads)
    data, _ = load_code_data(args.functions, args.splits, args.teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    sigs, bodies = load_code_texts(args.functions, args.teacher)
    bm = read_json(args.baselines)["baselines"]["bm25"]
    bm25 = BM25Scorer(bodies, bm["k1"], bm["b"])
    va, te = data.rows("val"), data.rows("test")
    lex_va = bm25.scores([sigs[i] for i in va])
    lex_te = bm25.scores([sigs[i] for i in te])
    lex_te_rank = competition_ranks(lex_te)
    corpus = targets.corpus.numpy()
    dev = pick_device(code.evaluate.device)
    out, frames = {}, []
    for v in code.variants:
        models = Path(args.models) / v
        if not (models / "summary.json").exists():
            print(f"hybrid_code: no models for {v}; skipped")
            continue
        seeds = [int(s["seed"]) for s in read_json(models / "summary.json")["seeds"]]
        dense_va, dense_te = [], []
        for s in seeds:
            student = load_student(checkpoint_path(models, s), dev)
            dense_va.append(predict(student, data, va, dev).numpy() @ corpus.T)
            dense_te.append(predict(student, data, te, dev).numpy() @ corpus.T)
        w, grid = fit_fusion_weight([lex_va] * len(seeds), dense_va, va, code.baselines.fusion_weights)
        per = {f"rrf_{v}": [], f"fusion_{v}": []}
        for s, dt in zip(seeds, dense_te):
            rr = ranks_from_scores(rrf_scores([lex_te_rank, competition_ranks(dt)],
                                              code.baselines.rrf_k), te)
            fr = ranks_from_scores(fuse_scores(lex_te, dt, w), te)
            for name, r in ((f"rrf_{v}", rr), (f"fusion_{v}", fr)):
                per[name].append({**rank_metrics(r), "seed": s})
                frames.append(pd.DataFrame({"id": te, "repo": data.repo[te], "hybrid": name,
                                            "seed": s, "rank": r}))
        for name, rows in per.items():
            m = {k: float(np.mean([r[k] for r in rows])) for k in KEYS}
            m.update(variant=v, kind=name.split("_")[0], n_seeds=len(rows), per_seed=rows,
                     bm25_k1=bm["k1"], bm25_b=bm["b"])
            if name.startswith("rrf_"):
                m["rrf_k"] = code.baselines.rrf_k
            else:
                m.update(weight=w, weight_grid=grid,
                         val_rank_at_10=max(g["val_rank_at_10"] for g in grid))
            out[name] = m
            print(f"hybrid_code: {name:28s} test R@10 {m['rank_at_10']:.2%} MRR {m['mrr']:.4f}"
                  + (f" (w={w:g})" if "weight" in m else ""))
    write_json(args.metrics, {"hybrids": out, "corpus_size": int(len(corpus)),
                              "n_queries": int(len(te))})
    write_csv(args.ranks, pd.concat(frames) if frames else
              pd.DataFrame(columns=["id", "repo", "hybrid", "seed", "rank"]))
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
