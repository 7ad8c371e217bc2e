"""DVC stage ``finetune_encoder@<variant>``: fine-tune (or evaluate a baseline) over seeds
(:func:`contrastlab.finetune.final.run_final_variant`).

Writes ``reports/metrics/finetune/<variant>.json``, ``reports/metrics/finetune/items/<variant>.npz``
and ``data/finetune/runs/<variant>/`` (embeddings and ``run.json``; committed);
MLflow: one ``contrastlab-finetune`` run per variant. ``--tuned FILE``: the row's
``tune_finetune`` choices (``reports/tuned/finetune/<variant>.json``). ``--override FILE`` (repeatable) merges
YAML over the params (``presets/finetune-gpu.yaml``). ``finetune.nproc`` > 1 (or ``auto``: one
per visible CUDA device) re-launches this script under torchrun (:func:`relaunch`, the ``cmd``
unchanged); there the contrastive loss gathers all ranks' embeddings, gradients are
averaged, rank 0 writes.
"""

import sys

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.final import run_final_variant
from contrastlab.params.presets import load_with_overrides
from contrastlab.utils import set_cpu_threads


def relaunch(script: str, argv: list[str], nproc: int | str) -> int | None:
    """Run ``script argv`` through ``python -m contrastlab.launch`` on ``nproc`` processes
    (``auto``: one per visible CUDA device, 1 without CUDA) when that is more than one and
    this process is not already a torchrun worker; returns the launcher's exit status, or
    None: run here as one process."""
    import os

    import torch

    n = (torch.cuda.device_count() if torch.cuda.is_available() else 1) if nproc == "auto" else int(nproc)
    if n <= 1 or "WORLD_SIZE" in os.environ:
        return None
    from contrastlab.launch import main as launch

    return launch(["--standalone", f"--nproc_per_node={n}", script, *argv])


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--cache", "--metrics-dir", "--runs-dir")
    ap.add_argument("--variant", required=True)
    ap.add_argument("--tuned", default=None,
                    help="the row's tune_finetune JSON (its choices override the params)")
    ap.add_argument("--override", action="append", default=[],
                    help="YAML merged over the params (e.g. presets/finetune-gpu.yaml)")
    args = ap.parse_args(argv)
    nproc = load_with_overrides(args.params, args.override).finetune.nproc
    rc = relaunch(__file__, sys.argv[1:] if argv is None else argv, nproc)
    if rc is not None:
        return rc
    set_cpu_threads()
    summary = run_final_variant(args.params, args.override, args.variant, args.data, args.cache,
                                args.metrics_dir, args.runs_dir, args.tuned)
    if summary is not None:
        m = {k: summary["metrics"].get(k, float("nan")) for k in ("a/knn5_pxt", "b/knn5_pxt", "b/probe_tier")}
        print(f"finetune_encoder@{args.variant}: split a kNN@5 problem x tier {m['a/knn5_pxt']:.3f}, "
              f"split b {m['b/knn5_pxt']:.3f}, tier probe b {m['b/probe_tier']:.3f}")
    return 0


if __name__ == "__main__":
    run(main)
