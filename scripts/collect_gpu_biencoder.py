"""Mark the outputs of the GPU route's stages (``scripts/biencoder_gpu.sh``: ``train_biencoder``
and ``hybrid_biencoder`` run with ``presets/code-biencoder-gpu.yaml``) as the report's GPU
table; not a DVC stage (the pipeline's default runs on two CPU cores).

    python scripts/collect_gpu_biencoder.py --metrics reports/metrics/code_biencoder_gpu \
        --logs WORKDIR/logs --device "NVIDIA H200" --preset presets/code-biencoder-gpu.yaml

In ``--metrics``, every row's JSON (``train_biencoder``'s metrics) gains ``device`` (what the
report's code section looks for), ``selection`` (how lr and steps were chosen: the study's
tuned file, or the row as the presets declare it) and ``run_note`` (``--note``), and ``model``
is set to ``--model`` when given (a model that reached the device as a local copy keeps its
name). ``logs/device_runs.json`` records the run: device, presets, the rows' training seconds
per seed read from the stage's log lines (``biencoder <row> seed <s>: ... (<t> s training,
...)``) and each row's wall seconds (``<row> wall_s=<t>`` in ``times.txt``). Seconds are wall
times, not metrics: the report reads them for the compute curve's GPU points only.

Raises (exit 2 through :func:`contrastlab.cli.run_stage`): no row in ``--metrics``, or a row
seed without a training-time line in its log.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from contrastlab.cli import ArgParser, run_stage
from contrastlab.errors import InputError

SEED_LINE = re.compile(r"^biencoder (\S+) seed (\d+): .*\((\d+(?:\.\d+)?) s training")
NOT_ROWS = ("baselines.json", "hybrids_biencoder.json")


def training_seconds(log: str) -> dict[int, float]:
    """``{seed: training seconds}`` from a ``train_biencoder`` log (its per-seed lines)."""
    out = {}
    for line in log.splitlines():
        m = SEED_LINE.match(line.strip())
        if m:
            out[int(m.group(2))] = float(m.group(3))
    return out


def collect(metrics: Path, logs: Path, *, device: str, presets: list[str], note: str = "",
            model: str | None = None) -> dict[str, dict]:
    """Annotate the rows in ``metrics`` and write ``metrics/logs/device_runs.json`` (module
    docstring); returns ``{row: metrics}``."""
    from contrastlab.io import write_json

    files = sorted(f for f in metrics.glob("*.json") if f.name not in NOT_ROWS)
    if not files:
        raise InputError(f"{metrics}: no row metrics (run train_biencoder first)")
    times = logs / "times.txt"
    wall = dict(re.findall(r"^(\S+) rc=0 wall_s=(\d+)", times.read_text(), re.M)) if times.exists() else {}
    out, finals, first = {}, {}, None
    for f in files:
        m = json.loads(f.read_text(encoding="utf-8"))
        secs = training_seconds((logs / f"{f.stem}.log").read_text(encoding="utf-8"))
        missing = [p["seed"] for p in m["per_seed"] if p["seed"] not in secs]
        if missing:
            raise InputError(f"{logs / f.stem}.log: no training-time line for seed(s) {missing}")
        m.update(device=device, run_note=note,
                 selection=("lr and temperature chosen by the row's study (tuned file)" if m.get("tuned")
                            else f"lr {m['lr']:g}, {m['steps']} steps as {' + '.join(presets)} declare "
                                 "them (no study)"))
        if model:
            m["model"] = model
        write_json(f, m)
        out[f.stem] = m
        first = first or m
        finals[f.stem] = [{"seed": p["seed"], "seconds": secs[p["seed"]], "tokens": p.get("tokens"),
                           "test_rank_at_10": p["rank_at_10"], "test_mrr": p["mrr"],
                           "val_rank_at_10": p["val_rank_at_10"], "temperature": p["final_temperature"]}
                          for p in m["per_seed"]]
    write_json(metrics / "logs" / "device_runs.json", {
        "note": "one entry per GPU run; seconds are wall times, not metrics",
        "runs": [{"device": device, "route": "pipeline stages (scripts/biencoder_gpu.sh)",
                  "presets": presets, "choice": {"lr": first["lr"], "steps": first["steps"]},
                  "layers": first["layers"], "max_length": first["max_length"],
                  "batch_size": first["batch_size"], "nproc": first.get("nproc"),
                  "index": first.get("index"), "finals": finals,
                  "row_wall_s": {k: float(v) for k, v in sorted(wall.items())}}]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", type=Path, default=Path("reports/metrics/code_biencoder_gpu"))
    ap.add_argument("--logs", type=Path, required=True, help="the stages' logs and times.txt")
    ap.add_argument("--device", required=True, help="e.g. 'NVIDIA H200' (torch.cuda.get_device_name)")
    ap.add_argument("--preset", action="append", required=True, help="each preset applied, in order")
    ap.add_argument("--note", default="", help="a sentence on how the run departs from the presets")
    ap.add_argument("--model", default=None, help="the model's name when the run read a local copy")
    args = ap.parse_args(argv)
    got = collect(args.metrics, args.logs, device=args.device, presets=args.preset, note=args.note,
                  model=args.model)
    for name, m in got.items():
        print(f"{name}: test R@10 {m['rank_at_10']:.2%} over {m['n_seeds']} seeds (val {m['val_rank_at_10']:.2%})")
    return 0


if __name__ == "__main__":
    run_stage(main)
