"""BM25 fused with every trained code-retrieval predictor (stage ``hybrid_code``):
:func:`run_hybrids`. Per variant and seed: reciprocal-rank fusion over the corpus (Cormack,
Clarke & Buettcher 2009, Eq. 1) and ``w z(bm25) + (1 - w) z(cosine)`` with ``w`` picked on
validation MRR by :func:`contrastlab.models.grid_picks.pick_on_grid` (margin recorded). The
control: the same fusions with the teacher's untrained sentence embedding (``rrf_sentence``,
``fusion_sentence``), also scored on the test queries at every grid weight
(``test_by_weight``), so each trained fusion is compared with the control at its own weight.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..data.code_inputs import load_code_data, load_code_texts
from ..io import read_json
from ..models.grid_picks import pick_fusion_weight
from ..models.code_baselines import (BM25Scorer, competition_ranks, fuse_scores, fuse_zscores,
                                     ranks_from_scores, rrf_scores,
                                     zscore_rows)
from ..models.code_student import checkpoint_path, load_student, predict, prepare_targets
from ..utils import pick_device, set_cpu_threads
from .retrieval import rank_metrics

__all__ = ["run_hybrids", "fuse_with_bm25", "sentence_control", "at_weight", "KEYS"]

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
    every = ()
    if code.baselines.sentence:  # the untrained control: cosine of the sentence embeddings
        sentence, pred = sentence_control(code, sigs, bodies, va, te)
        preds[sentence] = pred
        every = (sentence,)

    out, frames = fuse_with_bm25(code, bm, sigs, bodies, preds, va, te, data.repo, chunk,
                                 every_weight=every)
    metrics = {"hybrids": out, "corpus_size": int(len(corpus)), "n_queries": int(len(te))}
    ranks = pd.concat(frames) if frames else pd.DataFrame(columns=["id", "repo", "hybrid", "seed", "rank"])
    return metrics, ranks


def sentence_control(code, sigs: list[str], bodies: list[str], va, te) -> tuple[str, dict]:
    """``(row name, {0: (val queries, test queries, corpus)})`` of the untrained control's
    dense side: the teacher's sentence embedding (``encode_all``), unit rows."""
    import torch.nn.functional as F

    from ..losses.registry import method_row
    from .code_baselines import encode_all

    sentence = method_row("code", "sentence_embedding")
    qs, ds, _ = encode_all(code, sigs, bodies, [])[sentence]
    qs, ds = F.normalize(qs.float(), dim=-1).numpy(), F.normalize(ds.float(), dim=-1).numpy()
    return sentence, {0: (qs[va], qs[te], ds)}


def at_weight(name: str, w: float) -> str:
    """The ranks-file name of hybrid ``name`` evaluated at fusion weight ``w``."""
    return f"{name}@w{float(w):g}"


def fuse_with_bm25(code, bm: dict, sigs: list[str], bodies: list[str], preds: dict, va, te, repo,
                   chunk: int = 1024, every_weight=()) -> tuple[dict, list]:
    """BM25 (``bm``: its chosen ``k1``, ``b``) fused with each dense ranker of ``preds``.

    Args:
        code: the ``code`` params (``baselines.fusion_weights``, ``baselines.rrf_k``).
        sigs, bodies: every function's texts (row order of the corpus).
        preds: ranker -> seed -> ``(val queries [Qv, D], test queries [Qt, D], corpus [N, D])``
            (unit rows; the corpus may differ per ranker and seed).
        va, te: validation and test rows (each query's own body is that row of the corpus).
        repo: ``[N]`` repository group of every row (written with the ranks).
        every_weight: rankers whose score fusion is also evaluated on the test queries at
            every grid weight (the untrained control: one seed, cheap).

    Returns:
        ``(hybrids, frames)``: ``rrf_<ranker>`` and ``fusion_<ranker>`` metrics (mean and per
        seed; the weight picked on validation, its pick record ``pick`` with the margin, and
        the grid; for ``every_weight`` rankers ``test_by_weight``) and the test-rank
        DataFrames (``id, repo, hybrid, seed, rank``; ``fusion_<ranker>@w<w>`` for the test
        ranks at every weight).
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
    test.update({(at_weight(f"fusion_{v}", w), s): np.empty(len(te), np.int64)
                 for v in every_weight if v in preds for s in preds[v] for w in grid})
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
                if v in every_weight:
                    z_lex, z_dense = zscore_rows(lex), zscore_rows(dense)
                    for w in grid:
                        test[at_weight(f"fusion_{v}", w), s][sl] = ranks_from_scores(
                            fuse_zscores(z_lex, z_dense, w), rows)
    out, frames = {}, []
    for v, p in preds.items():
        w, table, pick = weights[v]
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
                at = next(g for g in table if g["weight"] == w)
                m.update(weight=w, pick=pick, weight_grid=table,
                         val_rank_at_10=at["val_rank_at_10"], val_mrr=at["val_mrr"])
                if v in every_weight:
                    m["test_by_weight"] = []
                    for g in table:
                        h = at_weight(name, g["weight"])
                        rs = [rank_metrics(test[h, s]) for s in p]
                        m["test_by_weight"].append(
                            {"weight": g["weight"], "hybrid": h,
                             **{k: float(np.mean([r[k] for r in rs])) for k in KEYS}})
                        frames.extend(pd.DataFrame({"id": te, "repo": np.asarray(repo)[te],
                                                    "hybrid": h, "seed": s, "rank": test[h, s]})
                                      for s in p)
            out[name] = m
            print(f"hybrid_code: {name:28s} test R@10 {m['rank_at_10']:.2%} MRR {m['mrr']:.4f}"
                  + (f" (w={w:g}, margin {pick['margin_items']} validation items"
                     + (", fragile" if pick["fragile"] else "") + ")" if "weight" in m else ""))
    return out, frames
