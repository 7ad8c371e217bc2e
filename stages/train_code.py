"""DVC stage ``train_code@<variant>``: SigPredictor on frozen teacher states (retrieval experiment notes; docs/sources.md).

Launched as ``python -m torch.distributed.run --standalone --nproc_per_node=N
stages/train_code.py --variant V`` (N = ``code.train.nproc``; plain ``python`` works too).
Writes the best checkpoint ``data/code/models/<V>.pt`` with ``<V>.json`` (summary) and the
per-epoch history ``reports/plots/code/<V>.csv``; the wall time goes to MLflow and
``reports/timings/code/<V>.json`` (:mod:`contrastlab.timings`), not into hashed outputs. MLflow run
``train_code@<V>`` in experiment ``contrastlab-code`` (rank 0 only).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from contrastlab.cli import run_stage
from contrastlab.data.teacher_states import load_teacher_states
from contrastlab.errors import InputError, UnknownNameError
from contrastlab.io import write_csv, write_json
from contrastlab.params import load_params
from contrastlab.timings import write_timing
from contrastlab.tracking import stage_run
from contrastlab.training.code import CodeData, train_code


def load_code_data(functions: str, splits: str, teacher: str) -> tuple[CodeData, int]:
    st = load_teacher_states(Path(teacher))
    sp = pd.read_parquet(splits, columns=["id", "split"]).sort_values("id")
    fn = pd.read_parquet(functions, columns=["id", "body_hash"]).sort_values("id")
    ids = st["ids"].numpy()
    if len(ids) != len(sp) or (sp["id"].to_numpy() != ids).any():
        raise InputError(f"{teacher}: teacher states do not match {splits} (rerun teacher_states)")
    data = CodeData(st["sig_states"], st["sig_mask"], st["body_emb"], sp["split"].to_numpy(),
                    fn["body_hash"].to_numpy())
    return data, int(st["index"]["hidden_size"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--models", default="data/code/models")
    ap.add_argument("--plots", default="reports/plots/code")
    ap.add_argument("--dump-first-step", default=None,
                    help="save the first step's loss and gradients here and stop (tests)")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    if args.variant not in code.variants:
        raise UnknownNameError(f"{args.params}: code.variants has no {args.variant!r} "
                               f"(known: {', '.join(code.variants)})")
    v = code.variants[args.variant]
    data, hidden = load_code_data(args.functions, args.splits, args.teacher)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    models = Path(args.models)
    ckpt = models / f"{args.variant}.pt"
    logged = {"variant": args.variant, "loss": v.loss, "model": code.model, "train": code.train,
              "teacher": code.teacher}
    with stage_run("code", f"train_code@{args.variant}", logged) as tracker:
        summary = train_code(
            data, hidden, v.loss, code.model, code.train, ckpt,
            on_epoch=lambda row: tracker.log_metrics(row, step=row["epoch"]),
            dump_first_step=Path(args.dump_first_step) if args.dump_first_step else None)
        if args.dump_first_step:
            return 0
        if rank0:
            tracker.log_metrics({"best_val_rank_at_10": summary["best_val_rank_at_10"],
                                 "time_s": summary["time_s"]})
            hist = pd.DataFrame(summary["history"])[
                ["epoch", "train_loss", "val_rank_at_10", "val_rank_at_1", "val_mrr",
                 "val_mean_cosine", "lr", "temperature"]]  # no wall times: reruns give equal bytes
            write_csv(Path(args.plots) / f"{args.variant}.csv", hist)
            # wall time: to MLflow (above) and the timings file, not into the hashed output
            write_timing("code", args.variant, {"time_s": round(summary["time_s"], 3)})
            write_json(models / f"{args.variant}.json",
                       {k: v for k, v in summary.items() if k not in ("history", "time_s")})
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
