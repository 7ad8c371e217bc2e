"""DVC stage ``teacher_states``: frozen-teacher states for every extracted function.

Per function: the signature's token states (fp16 ``[T, H]`` + mask) and the body's mean
embedding at ``code.teacher.layer``, in sharded safetensors under ``data/code/teacher``
with ``index.json``; ``code.teacher.workers`` shards at once in forked CPU processes. A rerun after an interruption keeps the finished shards (the output
is declared ``persist: true`` in dvc.yaml for that reason).
"""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path

import pandas as pd

from contrastlab.cli import run_stage, stage_parser
from contrastlab.data.teacher_states import write_teacher_states
from contrastlab.models.teacher import TeacherEncoder
from contrastlab.params import load_params
from contrastlab.timings import write_timing
from contrastlab.utils import set_cpu_threads


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--functions", "--out")
    args = ap.parse_args(argv)
    code = load_params(args.params).code
    t = code.teacher
    set_cpu_threads(code.teacher.threads)
    df = pd.read_parquet(args.functions, columns=["id", "signature", "body"]).sort_values("id")
    enc = TeacherEncoder(t.model, layer=t.layer, device=t.device, max_length=t.max_body_tokens)
    settings = {"model": t.model, "layer": enc.layer, "max_sig_tokens": t.max_sig_tokens,
                "max_body_tokens": t.max_body_tokens, "causal": enc.is_causal,
                "include_docstring": code.extract.include_docstring}
    workers = t.workers if enc.device.type == "cpu" else 1  # never fork a CUDA context
    t0 = time.time()
    index = write_teacher_states(
        Path(args.out), df["id"].tolist(), df["signature"].tolist(), df["body"].tolist(),
        partial(enc.encode_functions, batch_size=t.batch_size, progress=workers == 1,
                max_sig_tokens=t.max_sig_tokens),
        settings, max_sig_tokens=t.max_sig_tokens, hidden_size=enc.hidden_size,
        shard_size=t.shard_size, workers=workers)
    wall = time.time() - t0
    write_timing("code", "teacher_states", {"time_s": round(wall, 3),
                                            "reused_shards": index["reused_shards"]})
    print(f"teacher_states: {index['n_functions']} functions, {len(index['shards'])} shards "
          f"({index['reused_shards']} reused), layer {enc.layer}/{enc.num_layers_total}, "
          f"{wall:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
