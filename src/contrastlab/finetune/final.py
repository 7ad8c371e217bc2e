"""One compared fine-tuning variant end to end, as stage ``finetune_encoder@<variant>`` runs
it (callable from a notebook or under ``torchrun``): :func:`run_final_variant`; and the
index variant's query index, as stage ``finetune_index`` builds it: :func:`run_index_variant`.
Kept apart from :mod:`contrastlab.finetune.run` so that the cache stage does not depend on
the tracking code."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .run import load_with_overrides, run_variant, write_variant_outputs

__all__ = ["run_final_variant", "run_index_variant"]


def run_final_variant(params_path: str | Path, overrides: list[str | Path], variant: str,
                      data: str | Path, cache: str | Path, metrics_dir: str | Path,
                      runs_dir: str | Path, tuned: str | Path | None = None) -> dict[str, Any] | None:
    """Stage ``finetune_encoder@<variant>`` end to end: the params (with ``overrides``
    merged), the process group under ``torchrun`` (the contrastive loss gathers every rank's
    embeddings; gradients are averaged), :func:`~contrastlab.finetune.run.run_variant` on ``data`` (the variants
    parquet) and the lower-layer ``cache`` (not read by the row whose method is ``lexical``, TF-IDF), the files of
    :func:`~contrastlab.finetune.run.write_variant_outputs` under ``metrics_dir`` and ``<runs_dir>/<variant>``
    (embeddings, no encoder: a few MB, committed; ``run.json`` names the variant and seeds), one
    MLflow run and the wall time in the timings file (never in a hashed output). ``tuned``: the row's ``tune_finetune`` JSON, whose
    choices are applied over the params (``None``: the params as they are, e.g. a preset).

    Returns:
        The variant's summary (:func:`~contrastlab.finetune.run.write_variant_outputs`) on rank 0, ``None`` on the
        other ranks (which write nothing).
    """
    import pandas as pd

    from ..distributed import init_distributed
    from ..io import write_json
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
        res = run_variant(ft, df, tensors, variant, tracker=tracker)
        if not dist.is_main:  # under torchrun only rank 0 writes
            return None
        summary = write_variant_outputs(res, variant, metrics_dir, run_dir)
        # names the run (and keeps TF-IDF's folder, which has no embeddings, in git)
        write_json(run_dir / "run.json", {"variant": variant, "seeds": res["seeds"]})
        tracker.log_metrics({k.replace("/", "_"): x for k, x in summary["metrics"].items()})
    write_timing("finetune", f"finetune_encoder_{variant}",
                 {"time_s": round(time.perf_counter() - t0, 3)})
    return summary


def run_index_variant(params_path: str | Path, data: str | Path, cache: str | Path,
                      tuned_dir: str | Path | None, index: str | Path,
                      overrides: list[str | Path] = ()) -> str | None:
    """Stage ``finetune_index``: train the first seed of the role ``finetune.index_variant``
    with its ``tune_finetune`` choices (``<tuned_dir>/<variant>.json``; ``None``: the params
    as they are, as for a preset) as ``finetune_encoder@<variant>`` trains it, and write the FAISS index of that encoder's
    embeddings of every submission of ``data`` with the encoder itself to ``index``
    (:func:`contrastlab.finetune.index.write_index`; ``overrides`` merged over the params as
    in :func:`run_final_variant`); logs the encoder to MLflow as a
    ``sentence_transformers`` model. Its own stage so that the compared rows' runs hold no
    encoder (a few MB each, committed) and a fresh clone retrains this one seed only.

    Returns:
        The MLflow model URI, or ``None`` when tracking is off.

    Raises:
        FileNotFoundError: ``data``, ``cache`` or the tuned JSON is missing.
    """
    import tempfile

    import pandas as pd
    from safetensors.torch import load_file

    from ..tracking import variant_run
    from .encoder import FinetuneEncoder
    from .index import log_to_mlflow, write_index
    from .tune import load_tuned

    base = load_with_overrides(params_path, list(overrides)).finetune
    v = base.index_variant
    ft = load_tuned(base, None if tuned_dir is None else Path(tuned_dir) / f"{v}.json")
    df = pd.read_parquet(data)
    rows = [{"id": str(i), "problem": str(pr), "tier": str(t), "split": str(sp)}
            for i, pr, t, sp in zip(df["id"], df["problem"], df["tier"], df["split"])]
    with tempfile.TemporaryDirectory() as tmp:
        res = run_variant(ft, df, load_file(str(cache)), v, seeds=ft.seeds[:1],
                          save_model=Path(tmp) / "model")
        enc = FinetuneEncoder.load(Path(tmp) / "model")
    write_index(index, res["embeddings"][0], rows, enc,
                {"variant": v, "seed": ft.seeds[0], "strip_docstrings": ft.strip_docstrings})
    with variant_run("finetune", "index", {"variant": v, "seed": ft.seeds[0]},
                     stage="finetune_index") as tracker:
        return log_to_mlflow(index) if tracker.active else None
