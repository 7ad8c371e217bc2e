"""Retrieval throughput over a 50k x 384 corpus: FAISS inner-product search vs brute force.

Brute force = chunked ``queries @ corpus.T`` + ``torch.topk`` in PyTorch (the floor any
implementation must beat), same queries, same k, same threads. Also times
``true_ranks`` (the evaluation's exact rank of the true item, FAISS top-100 plus exact
counting for the rest). Printed as ratios measured in one run.

    .venv/bin/python bench/bench_retrieval.py [--n 50000] [--dim 384] [--queries 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick check that the benchmark runs (tests/foundation/test_bench_smoke.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.dim, args.queries = 400, 16, 20
    torch.set_num_threads(args.threads)
    import faiss

    faiss.omp_set_num_threads(args.threads)
    from contrastlab.evaluation.retrieval import build_index, search, true_ranks

    g = torch.Generator().manual_seed(0)
    corpus = F.normalize(torch.randn(args.n, args.dim, generator=g), dim=-1)
    true = torch.randint(0, args.n, (args.queries,), generator=g)
    queries = F.normalize(corpus[true] + 0.9 * torch.randn(args.queries, args.dim, generator=g), dim=-1)

    def brute():
        out = []
        for s in range(0, args.queries, 256):
            out.append(torch.topk(queries[s:s + 256] @ corpus.T, args.k, dim=1).indices)
        return torch.cat(out)

    index = build_index(corpus, "cpu")
    def faiss_search():
        return search(index, queries, args.k)[1]

    b_ids, f_ids = brute(), faiss_search()
    agree = (b_ids.numpy() == f_ids).all(1).mean()
    res = {}
    for name, fn in (("brute", brute), ("faiss", faiss_search),
                     ("true_ranks", lambda: true_ranks(queries, corpus, true.numpy(), 100, "cpu", index))):
        best = float("inf")
        for _ in range(2):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        res[name] = best
    print(f"corpus {args.n} x {args.dim}, {args.queries} queries, k={args.k}, "
          f"{args.threads} thread(s); top-{args.k} lists identical for {agree:.1%} of queries")
    print(f"FAISS IndexFlatIP vs torch matmul+topk: {res['brute'] / res['faiss']:.2f}x queries/s")
    print(f"true_ranks (exact rank + FAISS top-100) vs torch matmul+topk: "
          f"{res['brute'] / res['true_ranks']:.2f}x queries/s")


if __name__ == "__main__":
    main()
