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
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from contrastlab.cli import run_stage
from contrastlab.data.teacher_states import load_teacher_states
from contrastlab.evaluation.retrieval import build_index, rank_metrics, true_ranks
from contrastlab.io import write_csv, write_json
from contrastlab.models.code_baselines import (BM25Scorer, TargetSpace, fit_ridge,
                                               identifier_tokens, pooled_signature,
                                               ranks_from_scores, ridge_predict)
from contrastlab.models.teacher import TeacherEncoder
from contrastlab.params import load_params
from contrastlab.training.code import prepare_targets
from contrastlab.utils import set_cpu_threads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_code import load_code_data  # noqa: E402


def run_baselines(data, targets, lambdas, k_max: int = 100, device: str = "cpu") -> tuple[dict, pd.DataFrame]:
    """Metrics and per-query test ranks of the three baselines (see the module docstring)."""
    te, va, tr = data.rows("test"), data.rows("val"), data.rows("train")
    pooled = pooled_signature(data.sig_states, data.sig_mask)
    raw_corpus = F.normalize(data.body_emb.float(), dim=-1)
    idx_raw = build_index(raw_corpus, device)
    idx_c = build_index(targets.corpus, device)
    queries = {
        "zeroshot_raw": (pooled, raw_corpus, idx_raw),
        "zeroshot_centred": (targets.sig_space(pooled), targets.corpus, idx_c),
    }
    grid = []
    for lam in lambdas:
        w, mx, my = fit_ridge(pooled[tr], targets.body[tr], lam)
        r = true_ranks(ridge_predict(pooled[va], w, mx, my), targets.corpus, va, 10, index=idx_c)
        grid.append({"lambda": lam, "val_rank_at_10": float((r <= 10).mean()),
                     "val_mrr": float((1.0 / r).mean())})
    best = max(grid, key=lambda g: (g["val_rank_at_10"], g["val_mrr"]))
    w, mx, my = fit_ridge(pooled[tr], targets.body[tr], best["lambda"])
    queries["ridge"] = (ridge_predict(pooled, w, mx, my), targets.corpus, idx_c)
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
    metrics["ridge"]["lambda"] = best["lambda"]
    metrics["ridge"]["lambda_grid"] = grid
    return metrics, pd.concat(frames)


def bm25_grid(signatures, bodies, val, k1s, bs) -> tuple[dict, list[dict]]:
    """``(k1, b)`` with the best validation Rank@10 (ties: MRR, then grid order) and the grid."""
    toks = [identifier_tokens(b) for b in bodies]
    qs = [signatures[i] for i in val]
    grid = []
    for k1 in k1s:
        for b in bs:
            r = ranks_from_scores(BM25Scorer(bodies, k1, b, tokenized=toks).scores(qs), val)
            grid.append({"k1": float(k1), "b": float(b), "val_rank_at_10": float((r <= 10).mean()),
                         "val_mrr": float((1.0 / r).mean())})
    best = max(grid, key=lambda g: (g["val_rank_at_10"], g["val_mrr"]))
    return best, grid


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
    best, grid = bm25_grid(signatures, bodies, va, bp.bm25_k1, bp.bm25_b)
    bm = BM25Scorer(bodies, best["k1"], best["b"])
    r = ranks_from_scores(bm.scores([signatures[i] for i in te]), te)
    rows["bm25"] = (r, best["val_rank_at_10"], {"k1": best["k1"], "b": best["b"], "bm25_grid": grid})

    def dense(q: torch.Tensor, c: torch.Tensor) -> tuple[np.ndarray, float]:
        q, c = F.normalize(q.float(), dim=-1), F.normalize(c.float(), dim=-1)
        index = build_index(c, code.evaluate.device)
        vr = true_ranks(q[va], c, va, 10, index=index)
        return true_ranks(q[te], c, te, code.evaluate.k_max, index=index), float((vr <= 10).mean())

    enc = TeacherEncoder(t.model, layer=None, device=t.device, max_length=bp.sentence_max_tokens)
    qs = enc.encode_mean(signatures, t.batch_size)
    ds = enc.encode_mean(bodies, t.batch_size)
    r, v = dense(qs, ds)
    rows["sentence"] = (r, v, {"layers": enc.layer, "max_tokens": bp.sentence_max_tokens})
    del enc
    for layer in bp.zeroshot_layers:
        if layer == t.layer:
            continue
        enc = TeacherEncoder(t.model, layer=layer, device=t.device, max_length=t.max_body_tokens)
        sig, emb = enc.encode_functions(signatures, bodies, t.batch_size,
                                        max_sig_tokens=t.max_sig_tokens)
        pooled = torch.stack([s.float().mean(0) for s in sig])
        trt = torch.as_tensor(tr)
        q = TargetSpace.fit(pooled[trt], code.target.centre, code.target.whiten_eps)(pooled)
        c = TargetSpace.fit(emb[trt], code.target.centre, code.target.whiten_eps)(emb)
        r, v = dense(q, c)
        rows[f"zeroshot_centred_l{layer}"] = (r, v, {"layer": layer})
        del enc
    for name, (r, v, extra) in rows.items():
        m = rank_metrics(r)
        m["val_rank_at_10"] = v
        m.update(extra)
        metrics[name] = m
        frames.append(pd.DataFrame({"id": te, "repo": data.repo[te], "baseline": name, "rank": r}))
    return metrics, pd.concat(frames)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--metrics", default="reports/metrics/code/baselines.json")
    ap.add_argument("--ranks", default="reports/data/code/baselines_ranks.csv")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    set_cpu_threads(code.train.threads)
    torch.manual_seed(0)
    data, _ = load_code_data(args.functions, args.splits, args.teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    metrics, ranks = run_baselines(data, targets, code.baselines.ridge_lambdas,
                                   code.evaluate.k_max, code.evaluate.device)
    fn = pd.read_parquet(args.functions, columns=["id", "signature", "body"]).sort_values("id")
    ids = load_teacher_states(Path(args.teacher))["ids"].numpy()
    if len(fn) != len(ids) or (fn["id"].to_numpy() != ids).any():
        raise ValueError(f"{args.functions} does not match {args.teacher} (rerun teacher_states)")
    m2, r2 = run_text_baselines(code, fn["signature"].tolist(), fn["body"].tolist(), data)
    metrics.update(m2)
    ranks = pd.concat([ranks, r2])
    n = len(targets.corpus)
    out = {"baselines": metrics, "corpus_size": n, "n_queries": int(len(data.rows("test"))),
           "chance_rank_at_10": 10.0 / n, "centre": code.target.centre}
    write_json(args.metrics, out)
    write_csv(args.ranks, ranks)
    for k, m in metrics.items():
        print(f"baselines_code: {k:17s} test R@1 {m['rank_at_1']:.2%} R@10 {m['rank_at_10']:.2%} "
              f"MRR {m['mrr']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
