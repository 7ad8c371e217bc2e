"""Frozen-teacher states of every extracted function (stage ``teacher_states``; callable from
a notebook): :func:`run_teacher_states`."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

__all__ = ["run_teacher_states"]


def run_teacher_states(code, functions: str | Path, out: str | Path) -> dict:
    """Encode every function of ``functions`` (``functions.parquet``: ``id``, ``signature``,
    ``body``) with the frozen teacher ``code.teacher`` and write the sharded states under
    ``out`` (:func:`contrastlab.data.teacher_states.write_teacher_states`: per function the
    signature's token states, fp16 ``[T, H]`` + mask, and the body's mean embedding at
    ``code.teacher.layer``); ``code.teacher.workers`` shards at once in forked CPU processes,
    finished shards of an interrupted run are kept. The wall time goes to the timings file.

    Returns:
        The index (``n_functions``, ``shards``, ``reused_shards``, settings) plus ``layer``,
        ``num_layers_total`` and ``time_s``.
    """
    import pandas as pd

    import torch
    from transformers import AutoConfig

    from ..data.teacher_repro import PRECISION, encode_reproducible
    from ..data.teacher_states import write_teacher_states
    from ..models.teacher import TeacherEncoder, _is_causal, resolve_model
    from ..timings import write_timing
    from ..utils import set_cpu_threads

    t = code.teacher
    set_cpu_threads(t.threads)
    df = pd.read_parquet(functions, columns=["id", "signature", "body"]).sort_values("id")
    # A bidirectional teacher runs in float64 and its states are rounded to fixed grids, so
    # the stored bytes do not depend on the CPU, the BLAS kernel or the thread count
    # (contrastlab.data.teacher_repro); a causal one keeps the native-precision pass.
    causal = _is_causal(AutoConfig.from_pretrained(resolve_model(t.model)))
    enc = TeacherEncoder(t.model, layer=t.layer, device=t.device, max_length=t.max_body_tokens,
                         dtype=None if causal else torch.float64)
    settings = {"model": t.model, "layer": enc.layer, "max_sig_tokens": t.max_sig_tokens,
                "max_body_tokens": t.max_body_tokens, "causal": enc.is_causal,
                "include_docstring": code.extract.include_docstring,
                "precision": "native" if causal else PRECISION}
    workers = t.workers if enc.device.type == "cpu" else 1  # never fork a CUDA context
    encode = (enc.encode_functions if causal else partial(encode_reproducible, enc))
    t0 = time.time()
    index = write_teacher_states(
        Path(out), df["id"].tolist(), df["signature"].tolist(), df["body"].tolist(),
        partial(encode, batch_size=t.batch_size, progress=workers == 1,
                max_sig_tokens=t.max_sig_tokens),
        settings, max_sig_tokens=t.max_sig_tokens, hidden_size=enc.hidden_size,
        shard_size=t.shard_size, workers=workers)
    wall = time.time() - t0
    write_timing("code", "teacher_states", {"time_s": round(wall, 3),
                                            "reused_shards": index["reused_shards"]})
    return {**index, "layer": enc.layer, "num_layers_total": enc.num_layers_total, "time_s": wall}
