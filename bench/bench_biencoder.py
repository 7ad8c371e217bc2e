"""Bi-encoder training throughput: the contrastlab trainer over sentence-transformers, one run.

Both train the same model (all-MiniLM-L6-v2 by default), the same top ``--layers`` blocks,
on the same ``--steps`` x ``--batch`` signature/body pairs of the code corpus
(:func:`contrastlab.biencoder.train.pair_batches`), in-batch InfoNCE (sentence-transformers:
``MultipleNegativesRankingLoss`` through ``SentenceTransformer.old_fit``). Tokens = the
tokenised lengths of the trained pairs (identical for both). Printed: each trainer's training
tokens/s and their ratio ``ours / sentence-transformers`` (aim >= 1); the one-off lower-layer
cache of the pairs' texts is timed separately and the ratio is also given with it included.

Usage: ``python bench/bench_biencoder.py [--pairs 256] [--steps 4] [--batch 16] [--layers 1]
[--max-length 64] [--functions data/code/functions.parquet] [--params params.yaml]`` (without
the parquet: synthetic pairs from this package's own source; the rows are ``params.yaml``'s
``code.biencoder.rows``). The load of a shared machine scales both alike
within a run; compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import time
from pathlib import Path

import numpy as np
import torch


def _pairs(n: int, functions: str | None):
    if functions:
        import pandas as pd

        df = pd.read_parquet(functions).sort_values("id").head(n)
        return df["signature"].tolist(), df["body"].tolist()
    import importlib

    sigs, bodies = [], []
    for part in ("resample", "tests", "summary", "ranks"):  # evaluation.stats, in source order
        mod = importlib.import_module(f"contrastlab.evaluation.stats_{part}")
        for node in ast.walk(ast.parse(inspect.getsource(mod))):
            if isinstance(node, ast.FunctionDef):
                sigs.append(f"def {node.name}({ast.unparse(node.args)}):")
                bodies.append("\n".join(ast.unparse(b) for b in node.body))
    k = max(1, -(-n // len(sigs)))
    return (sigs * k)[:n], (bodies * k)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--layers", default="1")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--functions", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--params", default=str(Path(__file__).resolve().parents[1] / "params.yaml"),
                    help="params file whose code.biencoder.rows are benchmarked (default: the project's)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, one step: a quick check that the benchmark runs "
                         "(tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args()
    if args.smoke:
        args.pairs, args.steps, args.batch, args.max_length = 16, 1, 4, 16
    torch.set_num_threads(args.threads)
    from contrastlab.biencoder.data import Pairs, build_cache
    from contrastlab.biencoder.run import train_row
    from contrastlab.biencoder.train import load_cache
    from contrastlab.params import load_params
    from contrastlab.params.biencoder import BiencoderParams

    layers = args.layers if args.layers == "all" else int(args.layers)
    be = BiencoderParams(model=args.model, layers=layers, max_length=args.max_length, steps=args.steps,
                         batch_size=args.batch, threads=args.threads, device="cpu",
                         rows=load_params(args.params).code.biencoder.rows)
    sigs, bodies = _pairs(args.pairs, args.functions)
    n = len(sigs)
    pairs = Pairs(np.arange(n), sigs, bodies, np.array(["train"] * n, dtype=object),
                  np.array(["r"] * n), np.arange(n), [])
    t0 = time.perf_counter()
    sig_inp, body_inp = load_cache(build_cache(be, sigs, bodies))
    cache_s = time.perf_counter() - t0
    res = {}
    for name, row in be.rows.items():
        if row.loss != "infonce":
            continue
        _, _, info = train_row(be, row, pairs, sig_inp, body_inp, seed=0, device="cpu")
        res[row.trainer] = info
        print(f"{name:28s} ({row.trainer}): {info['tokens']} tokens in {info['seconds']:.1f} s "
              f"= {info['tokens'] / info['seconds']:.0f} tokens/s")
    ours, st = res["contrastlab"], res["sentence_transformers"]
    assert ours["tokens"] == st["tokens"], "both trainers must see the same pairs"
    r = (ours["tokens"] / ours["seconds"]) / (st["tokens"] / st["seconds"])
    print(f"lower-layer cache of {n} pairs: {cache_s:.1f} s (once per corpus, shared by every "
          f"trial, seed and row)")
    print(f"training tokens/s ratio ours / sentence-transformers: {r:.2f}x "
          f"(layers {args.layers}, batch {args.batch}, {args.steps} steps, max {args.max_length} tokens)")
    share = cache_s * min(1.0, args.steps * args.batch / n)
    print(f"with the cache of the trained pairs charged to ours: "
          f"{st['seconds'] / (ours['seconds'] + share):.2f}x")


if __name__ == "__main__":
    main()
