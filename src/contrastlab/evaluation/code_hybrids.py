"""BM25 fused with every trained code-retrieval predictor (stage ``hybrid_code``; callable
from a notebook): :func:`run_hybrids`. Per variant and seed, reciprocal-rank fusion
``1/(k + r_bm25) + 1/(k + r_dense)`` over the whole corpus (Cormack, Clarke & Buettcher 2009,
Eq. 1) and z-scored score fusion ``w z(bm25) + (1 - w) z(cosine)`` with ``w`` chosen on
validation Rank@10 (mean over seeds). The same two fusions of BM25 with the teacher's
untrained sentence embedding (``rrf_sentence``, ``fusion_sentence``; when
``code.baselines.sentence`` is on) are the control: a trained predictor earns its place in a
hybrid only if its hybrid beats this one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..data.code_inputs import load_code_data, load_code_texts
from ..io import read_json
from ..models.code_baselines import (BM25Scorer, competition_ranks, fuse_scores, fuse_zscores,
                                     pick_fusion_weight, ranks_from_scores, rrf_scores,
                                     zscore_rows)
from ..models.code_student import checkpoint_path, load_student, predict, prepare_targets
from ..utils import pick_device, set_cpu_threads
from .retrieval import rank_metrics

__all__ = ["run_hybrids", "fuse_with_bm25", "KEYS"]

KEYS = ("rank_at_1", "rank_at_5", "rank_at_10", "mrr", "median_rank")


def run_hybrids(code, baselines: str, models_dir: str, functions: str, splits: str,
                teacher: str, chunk: int = 1024) -> tuple[dict, pd.DataFrame]:
    """Every hybrid of BM25 (its validation-chosen k1, b from ``baselines``) with every
    trained variant of ``code.variants`` whose models exist under ``models_dir``.

    Score matrices are built ``chunk`` queries at a time (every fusion is per query, so the
    result does not depend on ``chunk``): memory is ``O(chunk x corpus)``, not
    ``O(queries x corpus)`` (14,153 x 56,944 float32 scores are 3.2 GB per matrix).

    Returns:
        ``(metrics, ranks)``: ``{"hybrids": {name: metrics}, "corpus_size", "n_queries"}``
        (Rank@k as fractions, MRR, median rank; per seed; the fusion weight and its
        validation grid) and the test ranks ``id, repo, hybrid, seed, rank``.

    Raises:
        FileNotFoundError: the baselines JSON or an input is missing.
        ValueError: ``chunk < 1``.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    set_cpu_threads(code.train.threads)
    data, _ = load_code_data(splits, teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    sigs, bodies = load_code_texts(functions, teacher)
    from ..losses.registry import method_row

    bm = read_json(baselines)["baselines"][method_row("code", "lexical")]
    va, te = data.rows("val"), data.rows("test")
    corpus = targets.corpus.numpy()
    dev = pick_device(code.evaluate.device)
    # per dense ranker and seed: validation and test queries [Q, D] and the corpus [N, D] they
    # are scored against (per chunk, below)
    preds: dict[str, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for v in code.variants:
        models = Path(models_dir) / v
        if not (models / "summary.json").exists():
            print(f"hybrid_code: no models for {v}; skipped")
            continue
        preds[v] = {}
        for s in (int(x["seed"]) for x in read_json(models / "summary.json")["seeds"]):
            student = load_student(checkpoint_path(models, s), dev)
            preds[v][s] = (predict(student, data, va, dev).numpy(),
                           predict(student, data, te, dev).numpy(), corpus)
    if code.baselines.sentence:  # the untrained control: cosine of the sentence embeddings
        import torch.nn.functional as F

        from .code_baselines import encode_all

        sentence = method_row("code", "sentence_embedding")
        qs, ds, _ = encode_all(code, sigs, bodies, [])[sentence]
        qs, ds = F.normalize(qs.float(), dim=-1).numpy(), F.normalize(ds.float(), dim=-1).numpy()
        preds[sentence] = {0: (qs[va], qs[te], ds)}

    out, frames = fuse_with_bm25(code, bm, sigs, bodies, preds, va, te, data.repo, chunk)
    metrics = {"hybrids": out, "corpus_size": int(len(corpus)), "n_queries": int(len(te))}
    ranks = pd.concat(frames) if frames else pd.DataFrame(columns=["id", "repo", "hybrid", "seed", "rank"])
    return metrics, ranks


def fuse_with_bm25(code, bm: dict, sigs: list[str], bodies: list[str], preds: dict, va, te, repo,
                   chunk: int = 1024) -> tuple[dict, list]:
    """BM25 (``bm``: its chosen ``k1``, ``b``) fused with each dense ranker of ``preds``.

    Args:
        code: the ``code`` params (``baselines.fusion_weights``, ``baselines.rrf_k``).
        sigs, bodies: every function's texts (row order of the corpus).
        preds: ranker -> seed -> ``(val queries [Qv, D], test queries [Qt, D], corpus [N, D])``
            (unit rows; the corpus may differ per ranker and seed).
        va, te: validation and test rows (each query's own body is that row of the corpus).
        repo: ``[N]`` repository group of every row (written with the ranks).

    Returns:
        ``(hybrids, frames)``: ``rrf_<ranker>`` and ``fusion_<ranker>`` metrics (mean and per
        seed, the weight chosen on validation and its grid) and the test-rank DataFrames
        (``id, repo, hybrid, seed, rank``).
    """
    bm25 = BM25Scorer(bodies, bm["k1"], bm["b"])
    grid = [float(w) for w in code.baselines.fusion_weights]

    def chunks(rows):
        for a in range(0, len(rows), chunk):
            yield slice(a, a + chunk), rows[a:a + chunk]

    # validation: ranks of every fusion weight, per variant and seed
    val = {v: {w: {s: np.empty(len(va), np.int64) for s in p} for w in grid}
           for v, p in preds.items()}
    for sl, rows in chunks(va):
        z_lex = zscore_rows(bm25.scores([sigs[i] for i in rows]))
        for v, p in preds.items():
            for s, (pv, _, c) in p.items():
                z_dense = zscore_rows(pv[sl] @ c.T)
                for w in grid:
                    val[v][w][s][sl] = ranks_from_scores(fuse_zscores(z_lex, z_dense, w), rows)
    weights = {v: pick_fusion_weight({w: list(val[v][w].values()) for w in grid}) for v in preds}
    # test: RRF and the chosen fusion, once
    test = {(f"{kind}_{v}", s): np.empty(len(te), np.int64)
            for v, p in preds.items() for s in p for kind in ("rrf", "fusion")}
    for sl, rows in chunks(te):
        lex = bm25.scores([sigs[i] for i in rows])
        lex_rank = competition_ranks(lex)
        for v, p in preds.items():
            for s, (_, pt, c) in p.items():
                dense = pt[sl] @ c.T
                test[f"rrf_{v}", s][sl] = ranks_from_scores(
                    rrf_scores([lex_rank, competition_ranks(dense)], code.baselines.rrf_k), rows)
                test[f"fusion_{v}", s][sl] = ranks_from_scores(
                    fuse_scores(lex, dense, weights[v][0]), rows)
    out, frames = {}, []
    for v, p in preds.items():
        w, table = weights[v]
        per = {f"rrf_{v}": [], f"fusion_{v}": []}
        for s in p:
            for name, rows_ in per.items():
                r = test[name, s]
                rows_.append({**rank_metrics(r), "seed": s})
                frames.append(pd.DataFrame({"id": te, "repo": np.asarray(repo)[te], "hybrid": name,
                                            "seed": s, "rank": r}))
        for name, rows_ in per.items():
            m = {k: float(np.mean([r[k] for r in rows_])) for k in KEYS}
            m.update(variant=v, kind=name.split("_")[0], n_seeds=len(rows_), per_seed=rows_,
                     bm25_k1=bm["k1"], bm25_b=bm["b"])
            if name.startswith("rrf_"):
                m["rrf_k"] = code.baselines.rrf_k
            else:
                m.update(weight=w, weight_grid=table,
                         val_rank_at_10=max(g["val_rank_at_10"] for g in table))
            out[name] = m
            print(f"hybrid_code: {name:28s} test R@10 {m['rank_at_10']:.2%} MRR {m['mrr']:.4f}"
                  + (f" (w={w:g})" if "weight" in m else ""))
    return out, frames
