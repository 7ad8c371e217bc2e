"""DVC stage ``train_code@<variant>``: SigPredictor on frozen teacher states.

Launched as ``python -m torch.distributed.run --standalone --nproc_per_node=N
stages/train_code.py --variant V`` (N = ``code.train.nproc``; plain ``python`` works too).
This stage owns the process group (initialised here, destroyed at the end). It trains one
model per seed of ``code.train.seeds`` (``code.train.workers`` of them at once in forked CPU
workers; see :func:`contrastlab.training.code.train_seeds`) with the variant's hyperparameters: the tuned
choices of ``--tuned DIR``/``<V>.json`` when given (``tune_code@<V>`` writes
``reports/tuned/code/<V>.json``), else the variant's ``lr`` / ``temperature``, else ``code.train``'s. Writes
``data/code/models/<V>/seed<k>.safetensors`` + ``summary.json`` and the per-epoch history of every
seed ``reports/plots/code/<V>.csv``. MLflow (rank 0 only): the variant's one run
(``contrastlab.tracking.variant_run``, shared with ``evaluate_code@<V>``, which adds the test
metrics) holding the variant's settings, the teacher states as its dataset, one nested run
per seed with the per-epoch curves, the checkpoints as logged models and the history CSV.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab import distributed as D
from contrastlab.cli import run_stage
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.timings import write_timing
from contrastlab.tracking import variant_run
from contrastlab.training.code import checkpoint_path, prepare_targets, train_seeds
from contrastlab.training.code_inputs import load_code_data, run_params, variant_settings


def teacher_digest(teacher: str) -> str:
    """SHA-256 prefix of the teacher states' ``index.json`` (ids, settings, shard hashes)."""
    import hashlib

    return hashlib.sha256((Path(teacher) / "index.json").read_bytes()).hexdigest()[:16]


HIST_COLS = ["seed", "epoch", "train_loss", "val_rank_at_10", "val_rank_at_1", "val_mrr",
             "val_mean_cosine", "lr", "temperature"]  # no wall times: reruns give equal bytes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--models", default="data/code/models")
    ap.add_argument("--plots", default="reports/plots/code")
    ap.add_argument("--tuned", default=None,
                    help="folder of tune_code's <variant>.json to train with the tuned choices")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    if args.variant not in code.variants:
        raise KeyError(f"{args.params}: code.variants has no {args.variant!r} "
                       f"(known: {', '.join(code.variants)})")
    v = code.variants[args.variant]
    cfg = variant_settings(code, args.variant,
                           Path(args.tuned) / f"{args.variant}.json" if args.tuned else None)
    data, hidden = load_code_data(args.functions, args.splits, args.teacher)
    targets = prepare_targets(data, code.target.centre, code.target.whiten_eps)
    info = D.init_distributed(code.train.device)  # the stage owns the process group
    try:
        out = Path(args.models) / args.variant
        logged = {**run_params(args.variant, v.loss, cfg), "model": code.model,
                  "train": code.train, "target": code.target, "teacher": code.teacher}
        hist, summaries, times = [], [], {}
        with variant_run("code", args.variant, run_params(args.variant, v.loss, cfg),
                         stage=f"train_code@{args.variant}") as tracker:
            tracker.log_params(logged)
            tracker.log_dataset("code-teacher-states", digest=teacher_digest(args.teacher),
                                source=str(args.teacher), context="training")
            seeds = list(code.train.seeds)
            summaries_full = train_seeds(data, hidden, v.loss, code.model, code.train, out,
                                         targets=targets, seeds=seeds, lr=cfg["lr"],
                                         temperature=cfg["temperature"],
                                         residual=cfg["residual"], workers=code.train.workers)
            for seed, s in zip(seeds, summaries_full):
                # per-seed MLflow runs after training (forked workers log nothing themselves)
                with tracker.seed_run(seed) as st:
                    for r in s["history"]:
                        st.log_metrics({k: r[k] for k in HIST_COLS[2:] if k in r},
                                       step=int(r["epoch"]))
                    st.log_metrics({"best_val_rank_at_10": s["best_val_rank_at_10"],
                                    "best_epoch": float(s["best_epoch"])})
                    if info.is_main:
                        st.log_model(checkpoint_path(out, seed),
                                     name=f"{args.variant}-seed{seed}",
                                     params={"loss": v.loss, "seed": seed})
                hist += [{"seed": seed, **r} for r in s["history"]]
                # wall times go to the timings file, not to the DVC-hashed summary.json
                summaries.append({k: x for k, x in s.items() if k not in ("history", "time_s")})
                times[f"seed{seed}_time_s"] = round(float(s["time_s"]), 3)
            if info.is_main:
                write_csv(Path(args.plots) / f"{args.variant}.csv", pd.DataFrame(hist)[HIST_COLS])
                write_json(out / "summary.json", {"variant": args.variant, "loss": v.loss, **cfg,
                                                  "seeds": summaries})
                tracker.log_metrics({"val_rank_at_10_mean": float(np.mean(
                    [x["best_val_rank_at_10"] for x in summaries]))})
                tracker.log_artifact(Path(args.plots) / f"{args.variant}.csv", "history")
                tracker.log_metrics({"time_s": sum(times.values())})
                write_timing("code", f"train_code_{args.variant}", times)
    finally:
        D.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
