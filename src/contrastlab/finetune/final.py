"""One compared fine-tuning variant end to end, as stage ``finetune_encoder@<variant>`` runs
it (callable from a notebook or under ``torchrun``): :func:`run_final_variant`. Kept apart
from :mod:`contrastlab.finetune.run` so that the cache stage does not depend on the
tracking code."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .run import load_with_overrides, run_variant, write_variant_outputs

__all__ = ["run_final_variant"]


def run_final_variant(params_path: str | Path, overrides: list[str | Path], variant: str,
                      data: str | Path, cache: str | Path, metrics_dir: str | Path,
                      runs_dir: str | Path, tuned: str | Path | None = None) -> dict[str, Any] | None:
    """Stage ``finetune_encoder@<variant>`` end to end: the params (with ``overrides``
    merged), the process group under ``torchrun`` (the contrastive loss gathers every rank's
    embeddings; gradients are averaged), :func:`~contrastlab.finetune.run.run_variant` on ``data`` (the variants
    parquet) and the lower-layer ``cache`` (not read by the row whose method is ``lexical``, TF-IDF), the files of
    :func:`~contrastlab.finetune.run.write_variant_outputs` under ``metrics_dir`` and ``<runs_dir>/<variant>`` (the
    index variant's encoder in ``model/``), one MLflow run and the wall time in the timings
    file (never in a hashed output). ``tuned``: the row's ``tune_finetune`` JSON, whose
    choices are applied over the params (``None``: the params as they are, e.g. a preset).

    Returns:
        The variant's summary (:func:`~contrastlab.finetune.run.write_variant_outputs`) on rank 0, ``None`` on the
        other ranks (which write nothing).
    """
    import pandas as pd

    from ..distributed import init_distributed
    from ..params.finetune import ROW_METHOD
    from ..timings import write_timing
    from ..tracking import variant_run
    from .tune import load_tuned

    ft = load_tuned(load_with_overrides(params_path, overrides).finetune, tuned)
    dist = init_distributed(ft.device)
    if dist.distributed:
        ft = ft.model_copy(update={"device": str(dist.device)})
    df = pd.read_parquet(data)
    tensors = None
    if ROW_METHOD.get(variant) != "lexical":  # TF-IDF reads no cache
        from safetensors.torch import load_file

        tensors = load_file(str(cache))
    run_dir = Path(runs_dir) / variant
    t0 = time.perf_counter()
    logged = {"variant": variant, **ft.model_dump(mode="json", exclude={"variants", "data", "eval"})}
    with variant_run("finetune", variant, logged, stage=f"finetune_encoder@{variant}") as tracker:
        save = run_dir / "model" if variant == ft.index_variant and dist.is_main else None
        res = run_variant(ft, df, tensors, variant, tracker=tracker, save_model=save)
        if not dist.is_main:  # under torchrun only rank 0 writes
            return None
        summary = write_variant_outputs(res, variant, metrics_dir, run_dir)
        tracker.log_metrics({k.replace("/", "_"): x for k, x in summary["metrics"].items()})
    write_timing("finetune", f"finetune_encoder_{variant}",
                 {"time_s": round(time.perf_counter() - t0, 3)})
    return summary
