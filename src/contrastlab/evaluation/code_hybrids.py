"""BM25 fused with every trained code-retrieval predictor (stage ``hybrid_code``; callable
from a notebook): :func:`run_hybrids`. Per variant and seed, reciprocal-rank fusion
``1/(k + r_bm25) + 1/(k + r_dense)`` over the whole corpus (Cormack, Clarke & Buettcher 2009,
Eq. 1) and z-scored score fusion ``w z(bm25) + (1 - w) z(cosine)`` with ``w`` chosen on
validation Rank@10 (mean over seeds).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..io import read_json
from ..models.code_baselines import (BM25Scorer, competition_ranks, fit_fusion_weight, fuse_scores,
                                     ranks_from_scores, rrf_scores)
from ..training.code import checkpoint_path, load_student, predict, prepare_targets
from ..training.code_inputs import load_code_data, load_code_texts
from ..utils import pick_device, set_cpu_threads
from .retrieval import rank_metrics

__all__ = ["run_hybrids", "KEYS"]

KEYS = ("rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank")


def run_hybrids(code, baselines: str, models_dir: str, functions: str, splits: str,
                teacher: str) -> tuple[dict, pd.DataFrame]:
    """Every hybrid of BM25 (its validation-chosen k1, b from ``baselines``) with every
    trained variant of ``code.variants`` whose models exist under ``models_dir``.

    Returns:
        ``(metrics, ranks)``: ``{"hybrids": {name: metrics}, "corpus_size", "n_queries"}``
        (Rank@k as fractions, MRR, median rank; per seed; the fusion weight and its
        validation grid) and the test ranks ``id, repo, hybrid, seed, rank``.

    Raises:
        FileNotFoundError: the baselines JSON or an input is missing.
    """
    set_cpu_threads(code.train.threads)
    data, _ = load_code_data(splits, teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    sigs, bodies = load_code_texts(functions, teacher)
    bm = read_json(baselines)["baselines"]["bm25"]
    bm25 = BM25Scorer(bodies, bm["k1"], bm["b"])
    va, te = data.rows("val"), data.rows("test")
    lex_va = bm25.scores([sigs[i] for i in va])
    lex_te = bm25.scores([sigs[i] for i in te])
    lex_te_rank = competition_ranks(lex_te)
    corpus = targets.corpus.numpy()
    dev = pick_device(code.evaluate.device)
    out, frames = {}, []
    for v in code.variants:
        models = Path(models_dir) / v
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
    metrics = {"hybrids": out, "corpus_size": int(len(corpus)), "n_queries": int(len(te))}
    ranks = pd.concat(frames) if frames else pd.DataFrame(columns=["id", "repo", "hybrid", "seed", "rank"])
    return metrics, ranks
