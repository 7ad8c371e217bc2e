"""DVC stage ``finetune_encoder@<variant>``: fine-tune (or evaluate a baseline) over seeds
(:func:`contrastlab.finetune.run.run_variant`; files: :func:`~contrastlab.finetune.run.write_variant_outputs`).

Writes ``reports/metrics/finetune/<variant>.json``, ``reports/metrics/finetune/items/<variant>.npz``
and ``data/finetune/runs/<variant>/`` (embeddings; the index variant's encoder in ``model/``);
MLflow: one ``contrastlab-finetune`` run per variant. ``--override FILE`` (repeatable) merges
YAML over the params (``presets/finetune-gpu.yaml``); under ``torchrun --nproc_per_node=N``
the contrastive loss gathers all ranks' embeddings, gradients are averaged, rank 0 writes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from contrastlab.cli import run_stage, stage_parser
from contrastlab.distributed import init_distributed
from contrastlab.finetune.run import load_with_overrides, run_variant, write_variant_outputs
from contrastlab.timings import write_timing
from contrastlab.tracking import variant_run
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--cache", "--metrics-dir", "--runs-dir")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--override", action="append", default=[],
                    help="YAML merged over the params (e.g. presets/finetune-gpu.yaml)")
    args = ap.parse_args(argv)
    set_cpu_threads()
    p = load_with_overrides(args.params, args.override)
    ft = p.finetune
    dist = init_distributed(ft.device)
    if dist.distributed:
        ft = ft.model_copy(update={"device": str(dist.device)})
    v = args.variant
    df = pd.read_parquet(args.data)
    cache = None
    if v != "tfidf":
        from safetensors.torch import load_file

        cache = load_file(args.cache)
    run_dir = Path(args.runs_dir) / v
    t0 = time.perf_counter()
    logged = {"variant": v, **ft.model_dump(mode="json", exclude={"variants", "data", "eval"})}
    with variant_run("finetune", v, logged, stage=f"finetune_encoder@{v}") as tracker:
        res = run_variant(ft, df, cache, v, tracker=tracker,
                          save_model=run_dir / "model" if v == ft.index_variant and dist.is_main else None)
        if not dist.is_main:  # under torchrun only rank 0 writes
            return 0
        summary = write_variant_outputs(res, v, args.metrics_dir, run_dir)
        tracker.log_metrics({k.replace("/", "_"): x for k, x in summary["metrics"].items()})
    dt = time.perf_counter() - t0
    write_timing("finetune", f"finetune_encoder_{v}", {"time_s": round(dt, 3)})
    m = summary["metrics"]
    print(f"finetune_encoder@{v}: split a kNN@5 problem x tier {m.get('a/knn5_pxt', float('nan')):.3f}, "
          f"split b {m.get('b/knn5_pxt', float('nan')):.3f}, tier probe b {m.get('b/probe_tier', float('nan')):.3f} "
          f"({dt:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
