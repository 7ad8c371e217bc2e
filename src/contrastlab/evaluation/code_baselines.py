"""Untrained code-retrieval baselines (stage ``baselines_code``), evaluated exactly like the
trained variants (same corpus, test signatures and FAISS ranking as ``evaluate_code``).
:func:`run_all` returns the metrics JSON and the per-query test ranks.

Rows (:mod:`contrastlab.models.code_baselines`): ``zeroshot_raw``, ``zeroshot_centred``
(``whiten`` with ``code.target.centre: whiten``), ``ridge`` (lambda picked on validation
MRR by the plateau-centre rule, :func:`contrastlab.models.grid_picks.pick_on_grid`), ``zeroshot_centred_l<L>`` per ``code.baselines.zeroshot_layers`` entry (the
teacher read at layer ``L``), ``sentence`` (the teacher's own sentence embedding, all layers,
masked mean, L2-normalised, up to ``code.baselines.sentence_max_tokens``; Reimers & Gurevych
2019) and ``bm25`` (``(k1, b)`` from the ``bm25_k1 x bm25_b`` grid picked on validation MRR by the
same rule, the grid's neighbours one step on one axis; ties broken against the true body; Robertson & Zaragoza 2009, Eq. 3.15, Lucene variant via
``bm25s``). Row names follow :func:`contrastlab.losses.registry.method_row`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ..data.code_inputs import load_code_data, load_code_texts
from ..losses.registry import method_row
from ..models.code_baselines import (BM25Scorer, TargetSpace, fit_ridge, identifier_tokens,
                                     pooled_signature, ranks_from_scores, ridge_predict)
from ..models.grid_picks import argmax_pick, pick_on_grid
from ..models.code_student import prepare_targets
from ..models.teacher import TeacherEncoder
from ..utils import set_cpu_threads
from .retrieval import build_index, rank_metrics, true_ranks

__all__ = ["run_all", "run_baselines", "run_text_baselines", "bm25_grid", "encode_all"]


def run_baselines(data, targets, lambdas, k_max: int = 100, device: str = "cpu") -> tuple[dict, pd.DataFrame]:
    """Metrics and per-query test ranks of the three baselines (see the module docstring)."""
    te, va, tr = data.rows("test"), data.rows("val"), data.rows("train")
    pooled = pooled_signature(data.sig_states, data.sig_mask)
    raw_corpus = F.normalize(data.body_emb.float(), dim=-1)
    idx_raw = build_index(raw_corpus, device)
    idx_c = build_index(targets.corpus, device)
    ridge = method_row("code", "closed_form_ridge")
    queries = {
        method_row("code", "zero_shot_raw"): (pooled, raw_corpus, idx_raw),
        method_row("code", "zero_shot_centred"): (targets.sig_space(pooled), targets.corpus, idx_c),
    }
    grid = []
    for lam in lambdas:
        w, mx, my = fit_ridge(pooled[tr], targets.body[tr], lam)
        r = true_ranks(ridge_predict(pooled[va], w, mx, my), targets.corpus, va, 10, index=idx_c)
        grid.append({"lambda": lam, "val_rank_at_10": float((r <= 10).mean()),
                     "val_mrr": float((1.0 / r).mean())})
    lams = [g["lambda"] for g in grid]
    pick = pick_on_grid(lams, [g["val_mrr"] for g in grid], len(va))
    best = next(g for g in grid if g["lambda"] == pick["choice"])
    w, mx, my = fit_ridge(pooled[tr], targets.body[tr], best["lambda"])
    queries[ridge] = (ridge_predict(pooled, w, mx, my), targets.corpus, idx_c)
    metrics, frames = {}, []
    for name, (q, corpus, index) in queries.items():
        qn = F.normalize(q, dim=-1)
        ranks = true_ranks(qn[te], corpus, te, k_max, index=index)
        m = rank_metrics(ranks)
        m["mean_cosine"] = float((qn[te] * corpus[te]).sum(-1).mean())
        vr = true_ranks(qn[va], corpus, va, 10, index=index)
        m["val_rank_at_10"] = float((vr <= 10).mean())
        metrics[name] = m
        frames.append(pd.DataFrame({"id": te, "repo": data.repo[te], "baseline": name,
                                    "rank": ranks}))
    metrics[ridge]["lambda"] = best["lambda"]
    metrics[ridge]["lambda_grid"] = grid
    metrics[ridge]["pick"] = pick
    # the former rule's record (validation Rank@10 argmax, ties MRR), for comparison
    metrics[ridge]["rank10_pick"] = argmax_pick(lams, [g["val_rank_at_10"] for g in grid], len(va),
                                                ties=[g["val_mrr"] for g in grid])
    return metrics, pd.concat(frames)


def bm25_grid(signatures, bodies, val, k1s, bs) -> tuple[dict, list[dict], dict]:
    """``(k1, b)`` picked on validation MRR by the plateau-centre rule over the 2-D grid
    (:func:`contrastlab.models.grid_picks.pick_on_grid`, neighbours one step on one axis), the
    grid and the pick record with its margin; the record's ``rank10_pick`` is the former rule's
    (validation Rank@10 argmax, ties MRR), for comparison (docs/code.md, "Picks on validation
    grids")."""
    toks = [identifier_tokens(b) for b in bodies]
    qs = [signatures[i] for i in val]
    grid = []
    for k1 in k1s:
        for b in bs:
            r = ranks_from_scores(BM25Scorer(bodies, k1, b, tokenized=toks).scores(qs), val)
            grid.append({"k1": float(k1), "b": float(b), "val_rank_at_10": float((r <= 10).mean()),
                         "val_mrr": float((1.0 / r).mean())})
    pts = [{"k1": g["k1"], "b": g["b"]} for g in grid]
    k1s, bs = sorted({g["k1"] for g in grid}), sorted({g["b"] for g in grid})
    pick = pick_on_grid(pts, [g["val_mrr"] for g in grid], len(qs),
                        coords=[(k1s.index(g["k1"]), bs.index(g["b"])) for g in grid])
    best = next(g for g in grid if {"k1": g["k1"], "b": g["b"]} == pick["choice"])
    pick["rank10_pick"] = argmax_pick(pts, [g["val_rank_at_10"] for g in grid], len(qs),
                                      ties=[g["val_mrr"] for g in grid])
    return best, grid, pick


_ENC: dict = {}


def _encode_job(job: tuple) -> tuple:
    """One encoding job in a (forked) worker: ``(key, part, kind, layer, max_length, sigs, bodies)``."""
    key, part, kind, model, layer, max_length, device, batch, max_sig, sigs, bodies = job
    torch.set_num_threads(1)
    ek = (model, layer, max_length)
    if ek not in _ENC:
        _ENC.clear()
        _ENC[ek] = TeacherEncoder(model, layer=layer, device=device, max_length=max_length)
    enc = _ENC[ek]
    if kind == "mean":
        return key, part, enc.encode_mean(bodies, batch), enc.layer
    sig, emb = enc.encode_functions(sigs, bodies, batch, max_sig_tokens=max_sig)
    return key, part, (torch.stack([x.float().mean(0) for x in sig]), emb), enc.layer


def encode_all(code, signatures: list[str], bodies: list[str], layers: list[int]) -> dict:
    """The sentence embedding (all layers, ``sentence_max_tokens``) of signatures and bodies,
    and per extra layer ``L`` the pooled signature states and body means (the teacher's
    truncation), in ``code.baselines.workers`` forked CPU processes (one on CUDA).

    Texts are split into interleaved parts (``i::workers``); each part is encoded by its own
    encoder, so the result is fixed for a fixed worker count.

    Returns:
        ``{<sentence_embedding row>: (sig [N, H], body [N, H], n_layers), L: (pooled [N, H],
        body [N, H])}``.
    """
    import multiprocessing as mp

    t, bp = code.teacher, code.baselines
    k = max(1, bp.workers)
    idx = [list(range(i, len(bodies), k)) for i in range(k)]
    jobs = []
    for p, ix in enumerate(idx):
        sg, bd = [signatures[i] for i in ix], [bodies[i] for i in ix]
        if bp.sentence:
            jobs.append(("sentence_sig", p, "mean", t.model, None, bp.sentence_max_tokens,
                         t.device, t.batch_size, t.max_sig_tokens, None, sg))
            jobs.append(("sentence_body", p, "mean", t.model, None, bp.sentence_max_tokens,
                         t.device, t.batch_size, t.max_sig_tokens, None, bd))
        for layer in layers:
            jobs.append((layer, p, "functions", t.model, layer, t.max_body_tokens, t.device,
                         t.batch_size, t.max_sig_tokens, sg, bd))
    jobs.sort(key=lambda j: (str(j[0]), j[1]))
    cuda = torch.cuda.is_available() and t.device != "cpu"
    if k == 1 or cuda:
        results = [_encode_job(j) for j in jobs]
    else:
        with mp.get_context("fork").Pool(k) as pool:
            results = pool.map(_encode_job, jobs, chunksize=1)
    got: dict = {}
    n_layers = None
    for key, p, val, layer in results:
        got[(key, p)] = val
        if key == "sentence_body":
            n_layers = layer

    def gather(key, pos=None):
        first = got[(key, 0)] if pos is None else got[(key, 0)][pos]
        out = torch.zeros((len(bodies), first.shape[1]), dtype=torch.float32)
        for p, ix in enumerate(idx):
            v = got[(key, p)] if pos is None else got[(key, p)][pos]
            out[torch.as_tensor(ix)] = v.float()
        return out

    res = ({method_row("code", "sentence_embedding"): (gather("sentence_sig"), gather("sentence_body"), n_layers)}
           if bp.sentence else {})
    for layer in layers:
        res[layer] = (gather(layer, 0), gather(layer, 1))
    return res


def run_text_baselines(code, signatures: list[str], bodies: list[str], data) -> tuple[dict, pd.DataFrame]:
    """BM25, the teacher's sentence embedding and the extra-layer zero-shot rows.

    Args:
        code: the ``code`` params; signatures, bodies: ``N`` strings in id order (rows of
            ``data``).

    Returns:
        ``(metrics per row, ranks frame id/repo/baseline/rank)``.
    """
    te, va, tr = data.rows("test"), data.rows("val"), data.rows("train")
    bp, t = code.baselines, code.teacher
    metrics, frames, rows = {}, [], {}
    best, grid, pick = bm25_grid(signatures, bodies, va, bp.bm25_k1, bp.bm25_b)
    bm = BM25Scorer(bodies, best["k1"], best["b"])
    r = ranks_from_scores(bm.scores([signatures[i] for i in te]), te)
    rows[method_row("code", "lexical")] = (r, best["val_rank_at_10"],
                                           {"k1": best["k1"], "b": best["b"], "bm25_grid": grid,
                                            "pick": pick, "rank10_pick": pick.pop("rank10_pick")})

    def dense(q: torch.Tensor, c: torch.Tensor) -> tuple[np.ndarray, float]:
        q, c = F.normalize(q.float(), dim=-1), F.normalize(c.float(), dim=-1)
        index = build_index(c, code.evaluate.device)
        vr = true_ranks(q[va], c, va, 10, index=index)
        return true_ranks(q[te], c, te, code.evaluate.k_max, index=index), float((vr <= 10).mean())

    layers = [x for x in bp.zeroshot_layers if x != t.layer]
    enc_out = encode_all(code, signatures, bodies, layers) if bp.sentence or layers else {}
    if bp.sentence:
        sentence = method_row("code", "sentence_embedding")
        qs, ds, n_layers = enc_out[sentence]
        r, v = dense(qs, ds)
        rows[sentence] = (r, v, {"layers": n_layers, "max_tokens": bp.sentence_max_tokens})
    for layer in layers:
        pooled, emb = enc_out[layer]
        trt = torch.as_tensor(tr)
        q = TargetSpace.fit(pooled[trt], code.target.centre, code.target.whiten_eps)(pooled)
        c = TargetSpace.fit(emb[trt], code.target.centre, code.target.whiten_eps)(emb)
        r, v = dense(q, c)
        rows[f"{method_row('code', 'zero_shot_centred')}_l{layer}"] = (r, v, {"layer": layer})
    for name, (r, v, extra) in rows.items():
        m = rank_metrics(r)
        m["val_rank_at_10"] = v
        m.update(extra)
        metrics[name] = m
        frames.append(pd.DataFrame({"id": te, "repo": data.repo[te], "baseline": name, "rank": r}))
    return metrics, pd.concat(frames)


def run_all(code, functions: str, splits: str, teacher: str) -> tuple[dict, pd.DataFrame]:
    """Every baseline row of the ``code`` params section on the extracted corpus.

    Args:
        code: the ``code`` params section (:class:`contrastlab.params.CodeParams`).
        functions, splits, teacher: ``functions.parquet``, ``splits.parquet`` and the teacher
            states folder of the code track.

    Returns:
        ``(out, ranks)``: ``out = {"baselines": {row: metrics}, "corpus_size",
        "n_queries", "chance_rank_at_10", "centre"}`` (Rank@k as fractions, MRR) and the
        test ranks as a DataFrame ``id, repo, baseline, rank`` (1 = first).

    Raises:
        FileNotFoundError: an input is missing (run the upstream stages first).
    """
    set_cpu_threads(code.train.threads)
    torch.manual_seed(0)
    data, _ = load_code_data(splits, teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    metrics, ranks = run_baselines(data, targets, code.baselines.ridge_lambdas,
                                   code.evaluate.k_max, code.evaluate.device)
    sigs, bodies = load_code_texts(functions, teacher)
    m2, r2 = run_text_baselines(code, sigs, bodies, data)
    metrics.update(m2)
    ranks = pd.concat([ranks, r2])
    n = len(targets.corpus)
    out = {"baselines": metrics, "corpus_size": n, "n_queries": int(len(data.rows("test"))),
           "chance_rank_at_10": 10.0 / n, "centre": code.target.centre}
    return out, ranks
