"""DVC stage ``baselines_code``: untrained baselines, evaluated exactly like the variants.

Same corpus (every extracted body), same test signatures, same FAISS ranking as
``evaluate_code``. Rows (``contrastlab.models.code_baselines``):

- ``zeroshot_raw``: masked mean of the signature's teacher states vs the raw body embedding;
- ``zeroshot_centred``: both centred (and whitened with ``code.target.centre: whiten``) on
  the training functions;
- ``ridge``: closed-form ridge from the centred pooled signature states to the target-space
  body, lambda chosen on the validation repositories (Rank@10, then MRR).

Writes ``reports/metrics/code/baselines.json`` (metrics per baseline, chosen lambda, the
validation scores of every lambda) and ``reports/data/code/baselines_ranks.csv``
(``id, repo, baseline, rank``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

from contrastlab.cli import run_stage
from contrastlab.evaluation.retrieval import build_index, rank_metrics, true_ranks
from contrastlab.io import write_csv, write_json
from contrastlab.models.code_baselines import (fit_ridge, pooled_signature,
                                               ridge_predict)
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
