"""DVC stage ``evaluate_code@<variant>``: test signatures against the corpus of all bodies.

Metrics (Rank@1/5/10 as fractions, MRR, median rank, mean cosine to the true body, corpus
size, best epoch, validation Rank@10) in ``reports/metrics/code/<V>.json``; the Rank@k
curve (k = 1..k_max) in ``reports/data/code/<V>_rank_curve.csv``. Its wall time goes to
``reports/timings/code/<V>_evaluate.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from contrastlab.cli import run_stage
from contrastlab.evaluation.retrieval import retrieval_metrics
from contrastlab.io import read_json, write_csv, write_json
from contrastlab.params import load_params
from contrastlab.timings import write_timing
from contrastlab.tracking import stage_run
from contrastlab.training.code import load_student, predict
from contrastlab.utils import pick_device, set_cpu_threads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_code import load_code_data  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--teacher", default="data/code/teacher")
    ap.add_argument("--models", default="data/code/models")
    ap.add_argument("--metrics", default="reports/metrics/code")
    ap.add_argument("--curves", default="reports/data/code")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    set_cpu_threads(code.train.threads)
    t0 = time.time()
    data, _ = load_code_data(args.functions, args.splits, args.teacher)
    models = Path(args.models)
    dev = pick_device(code.evaluate.device)
    student = load_student(models / f"{args.variant}.pt", dev)
    summary = read_json(models / f"{args.variant}.json")
    test = data.rows("test")
    pred = predict(student, data, test, dev)
    corpus = F.normalize(data.body_emb.float(), dim=-1)
    m, curve = retrieval_metrics(pred, corpus, test, k_max=code.evaluate.k_max,
                                 device=code.evaluate.device)
    write_timing("code", f"{args.variant}_evaluate", {"time_s": round(time.time() - t0, 3)})
    m.update({"best_epoch": int(summary["best_epoch"]),
              "val_rank_at_10": float(summary["best_val_rank_at_10"])})
    write_json(Path(args.metrics) / f"{args.variant}.json", m)
    write_csv(Path(args.curves) / f"{args.variant}_rank_curve.csv",
              pd.DataFrame({"k": np.arange(1, len(curve) + 1), "rank_at_k": curve}))
    with stage_run("code", f"evaluate_code@{args.variant}", {"variant": args.variant,
                                                              "evaluate": code.evaluate}) as tr:
        tr.log_metrics({f"test_{k}": v for k, v in m.items()})
    print(f"evaluate_code@{args.variant}: test R@1 {m['rank_at_1']:.2%} R@5 {m['rank_at_5']:.2%} "
          f"R@10 {m['rank_at_10']:.2%} MRR {m['mrr']:.4f} median rank {m['median_rank']:.0f} "
          f"cos {m['mean_cosine']:.3f} (corpus {m['corpus_size']})")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
