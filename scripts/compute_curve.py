"""The compute curve of the code track's bi-encoder: test Rank@10 against training compute.

Answers "how much compute does it take to beat BM25 here?" for the InfoNCE bi-encoder
(in-batch negatives, van den Oord et al. 2018, Eq. 4; row ``code.biencoder.rows.<--row>``) on
the CPU. Each point of the curve is a budget: ``layers`` top blocks of all-MiniLM-L6-v2
trained (the lower ones cached, as ``biencoder_cache`` does; ``all`` = every block and the
embeddings) x ``steps`` of ``batch_size`` pairs x ``max_length`` tokens. At each point:

1. selection on the validation repositories only: one model per learning rate of ``--lrs``
   (seed ``--val-seed``, the row's temperature), scored against every body of the corpus;
   the learning rate with the best validation MRR is kept (a smooth criterion: validation
   Rank@10 over 894 queries ties or flips on one query; the Rank@10 margin is recorded);
2. the kept model is scored once on the test repositories (Rank@10 and MRR, all bodies,
   exact inner-product search, ties against).

Compute is CPU time of this process (``time.process_time``, every thread) in minutes, split
into ``cache_cpu_min`` (the frozen lower-layer states of every function, once per
``layers`` x ``max_length``), ``train_cpu_min`` (the kept model's training) and
``select_cpu_min`` (training and scoring the other learning rates); a point's cost to reach
its number is cache + train + select. Wall times are not recorded (a shared machine).

Writes ``--out`` (JSON, atomically, after every point, so a stopped run keeps what ran):
``{"points": [...], "config": {...}}``. Run in the background; rerunning
skips the points already in ``--out``::

    python scripts/compute_curve.py --out reports/metrics/code_compute_curve/curve.json \\
        --points 1:24:64 1:100:64 2:100:64 all:100:64 1:400:64 all:400:128
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def _point(spec: str) -> tuple[str, int, int]:
    layers, steps, tokens = spec.split(":")
    return layers, int(steps), int(tokens)


def _metrics(ranks: np.ndarray) -> dict:
    ranks = np.asarray(ranks)
    return {"rank_at_10": float(np.mean(ranks <= 10)), "mrr": float(np.mean(1.0 / ranks)),
            "hits_at_10": int(np.sum(ranks <= 10)), "n": int(len(ranks))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--row", default="biencoder_infonce")
    ap.add_argument("--points", nargs="+", required=True, help="layers:steps:max_length")
    ap.add_argument("--lrs", nargs="+", type=float, default=[5e-5, 2e-4])
    ap.add_argument("--val-seed", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    import torch

    from contrastlab.biencoder.data import build_cache, load_pairs
    from contrastlab.biencoder.run import apply_choices, embed_all, row_of, score_row, train_row
    from contrastlab.biencoder.train import load_cache
    from contrastlab.io import write_json
    from contrastlab.params import load_params
    from contrastlab.utils import set_cpu_threads

    set_cpu_threads(args.threads)
    be0 = load_params(args.params).code.biencoder
    row0 = row_of(be0, args.row)
    pairs = load_pairs(args.functions, args.splits)
    va, te = pairs.rows("val"), pairs.rows("test")
    out_path = Path(args.out)
    state = json.loads(out_path.read_text()) if out_path.exists() else {"points": []}
    done = {(p["layers"], p["steps"], p["max_length"]) for p in state["points"]}
    state["config"] = {"row": args.row, "loss": row0.loss, "temperature": row0.temperature,
                       "batch_size": be0.batch_size, "lrs": args.lrs, "val_seed": args.val_seed,
                       "threads": args.threads, "model": be0.model, "n_val": int(len(va)),
                       "n_test": int(len(te)), "n_bodies": int(len(pairs.ids)),
                       "device": "cpu", "torch": torch.__version__}
    caches: dict = {}
    for spec in args.points:
        layers, steps, tokens = _point(spec)
        if (layers, steps, tokens) in done:
            continue
        lay = "all" if layers == "all" else int(layers)
        be = be0.model_copy(update={"layers": lay, "steps": steps, "max_length": tokens,
                                    "device": "cpu", "bf16": "off"})
        cache_cpu = 0.0
        if (layers, tokens) not in caches:
            t0 = time.process_time()
            tensors = build_cache(be, pairs.signatures, pairs.bodies, reproducible=False)
            caches[(layers, tokens)] = load_cache(tensors)
            caches[(layers, tokens)] += (time.process_time() - t0,)
        sig_inp, body_inp, cache_cpu = caches[(layers, tokens)]
        cands = []
        for lr in args.lrs:
            row = apply_choices(row0, {"lr": lr})
            t0 = time.process_time()
            s_enc, b_enc, info = train_row(be, row, pairs, sig_inp, body_inp, args.val_seed, "cpu")
            t_train = time.process_time() - t0
            q, c = embed_all(be, s_enc, b_enc, sig_inp, body_inp, va, "cpu")
            val = _metrics(score_row(q, c, va, 100, "cpu"))
            t_all = time.process_time() - t0
            cands.append({"lr": lr, "val": val, "train_cpu_s": t_train, "all_cpu_s": t_all,
                          "temperature": float(info["temperature"]), "models": (s_enc, b_enc)})
            print(f"{spec} lr {lr:g}: val R@10 {val['rank_at_10']:.2%} MRR {val['mrr']:.4f} "
                  f"({t_train / 60:.1f} CPU-min training)", flush=True)
        best = max(cands, key=lambda c: c["val"]["mrr"])
        runner = sorted(cands, key=lambda c: -c["val"]["mrr"])[1] if len(cands) > 1 else None
        s_enc, b_enc = best["models"]
        q, c = embed_all(be, s_enc, b_enc, sig_inp, body_inp, te, "cpu")
        test = _metrics(score_row(q, c, te, 100, "cpu"))
        point = {"layers": layers, "steps": steps, "max_length": tokens, "lr": best["lr"],
                 "val": best["val"], "test": test,
                 "margin_val_hits_at_10": (None if runner is None else
                                           best["val"]["hits_at_10"] - runner["val"]["hits_at_10"]),
                 "candidates": [{k: v for k, v in x.items() if k != "models"} for x in cands],
                 "cache_cpu_min": cache_cpu / 60, "train_cpu_min": best["train_cpu_s"] / 60,
                 "select_cpu_min": sum(x["all_cpu_s"] for x in cands if x is not best) / 60,
                 "pairs_seen": steps * be.batch_size}
        point["total_cpu_min"] = point["cache_cpu_min"] + point["train_cpu_min"] + point["select_cpu_min"]
        state["points"].append(point)
        print(f"{spec}: lr {best['lr']:g} test R@10 {test['rank_at_10']:.2%} "
              f"({point['total_cpu_min']:.1f} CPU-min in all)", flush=True)
        write_json(out_path, state)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
