"""Turn the output folders of ``scripts/gpu_biencoder.py`` (one GPU run, or several runs that
add seeds at the same choice) into the report's third code table; not a DVC stage (the GPU
run is not part of ``dvc repro``: the pipeline's default runs on two CPU cores).

    python scripts/collect_gpu_biencoder.py RUN_DIR [RUN_DIR ...]

Writes, atomically:

- ``reports/metrics/code_biencoder_gpu/<row>.json``: the keys of ``train_biencoder``'s metrics
  (:func:`contrastlab.biencoder.outputs.row_metrics`) with the GPU preset's settings and the
  validation choice (``lr``, ``steps``), plus ``device``, ``selection``, ``index`` (the exact
  search that ran) and ``run_note`` (``--note``);
- ``reports/data/code_biencoder_gpu/<row>_ranks.csv`` (``id, repo, seed, rank``: test) and
  ``<row>_rank_curve.csv``;
- ``baselines.json`` / ``baselines_ranks.csv`` copied from the default table (same corpus,
  same test signatures), so the table's paired tests run against the same BM25;
- ``reports/data/code_biencoder_gpu/device_ranks.csv.gz``: every run's validation and test
  ranks as the device wrote them (the collection can be redone from the committed files);
- ``reports/metrics/code_biencoder_gpu/logs/device_runs.json``: each run's summary (device,
  library versions, the grid, training seconds and tokens) and its log; the seconds are wall
  times, not metrics (the report reads the folder's top-level JSON files only).

Raises (exit 2 through :func:`contrastlab.cli.run_stage`): runs made with different choices or
settings, a seed present in two runs, ranks that do not cover the test signatures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab.cli import ArgParser, run_stage
from contrastlab.errors import InputError

SAME = ("choice", "layers", "max_length", "batch_size", "n_bodies", "n_val", "n_test", "preset")


def collect(runs: list[Path], *, params: str, functions: str, splits: str, metrics_in: Path,
            data_in: Path, metrics_out: Path, data_out: Path, timings: Path, note: str = "") -> dict[str, dict]:
    """Collect ``runs`` (module docstring); returns ``{row: metrics}``."""
    from contrastlab.biencoder.data import load_pairs
    from contrastlab.biencoder.outputs import row_metrics, write_rank_files
    from contrastlab.biencoder.run import apply_choices, row_of
    from contrastlab.io import atomic_path, write_json
    from contrastlab.params.presets import load_with_overrides

    sums = [json.loads((r / "summary.json").read_text(encoding="utf-8")) for r in runs]
    for k in SAME:
        if len({json.dumps(s.get(k), sort_keys=True) for s in sums}) != 1:
            raise InputError(f"the runs differ in {k!r}: {[s.get(k) for s in sums]}")
    first = sums[0]
    choice = first["choice"]
    preset = Path(first["preset"])  # relative to the repository (params.yaml's folder)
    preset = preset if preset.is_absolute() else Path(params).resolve().parent / preset
    be = load_with_overrides(params, [preset]).code.biencoder
    be = be.model_copy(update={"steps": int(choice["steps"])})
    pairs = load_pairs(functions, splits)
    va, te = pairs.rows("val"), pairs.rows("test")
    grid = [g for s in sums for g in s["grid"] if not g.get("given")]
    selection = (f"lr and steps chosen on validation Rank@10 of {next(iter(be.rows))} (seed "
                 f"{be.tune.seeds[0]}) over " + ", ".join(f"lr {g['lr']:g} x {g['steps']} steps" for g in grid))
    raw = pd.concat([pd.read_csv(f).assign(run=i, row_name=f.stem.removeprefix("ranks_"))
                     for i, r in enumerate(runs) for f in sorted(r.glob("ranks_*.csv"))],
                    ignore_index=True)
    out: dict[str, dict] = {}
    for name in sorted(raw["row_name"].unique()):
        d = raw[raw["row_name"] == name]
        if d.groupby("seed")["run"].nunique().max() > 1:
            raise InputError(f"{name}: a seed appears in two runs")
        seeds = sorted(int(s) for s in d["seed"].unique())
        ranks = {}
        for split, rows in (("val", va), ("test", te)):
            mat = []
            for s in seeds:
                part = d[(d["seed"] == s) & (d["split"] == split)].sort_values("row")
                if not np.array_equal(part["row"].to_numpy(), np.sort(rows)):
                    raise InputError(f"{name} seed {s}: the {split} ranks do not cover the {split} signatures")
                mat.append(part["rank"].to_numpy())
            ranks[split] = np.stack(mat)
        info = [next({**f, "curve": None} for sm in sums for f in sm["finals"].get(name, []) if f["seed"] == s)
                for s in seeds]
        row = apply_choices(row_of(be, name), {"lr": choice["lr"]})
        res = {"row": row, "ranks": ranks, "info": info}
        m = row_metrics(be, name, res, pairs, tuned=False)
        m.update(device=first["device"], selection=selection, index=first.get("index", "faiss"),
                 run_note=note)
        write_json(metrics_out / f"{name}.json", m)
        write_rank_files(name, res, pairs, data_out)
        out[name] = m
    for f, src in ((metrics_out / "baselines.json", metrics_in / "baselines.json"),
                   (data_out / "baselines_ranks.csv", data_in / "baselines_ranks.csv")):
        with atomic_path(f) as tmp:
            shutil.copyfile(src, tmp)
    dev = raw.drop(columns=["run"]).sort_values(["row_name", "seed", "split", "row"])
    with atomic_path(data_out / "device_ranks.csv.gz") as tmp, open(tmp, "wb") as fh, \
            gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:  # no name, no time
        gz.write(dev.to_csv(index=False).encode("utf-8"))
    logs = [(r / "log.txt").read_text(encoding="utf-8").splitlines() if (r / "log.txt").exists() else []
            for r in runs]
    write_json(timings, {"runs": [{**s, "log": lg} for s, lg in zip(sums, logs)],
                         "note": "one entry per GPU run; seconds are wall times, not metrics"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = ArgParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--splits", default="data/code/splits.parquet")
    ap.add_argument("--metrics-in", type=Path, default=Path("reports/metrics/code"))
    ap.add_argument("--data-in", type=Path, default=Path("reports/data/code"))
    ap.add_argument("--metrics-out", type=Path, default=Path("reports/metrics/code_biencoder_gpu"))
    ap.add_argument("--data-out", type=Path, default=Path("reports/data/code_biencoder_gpu"))
    ap.add_argument("--note", default="", help="a sentence on how the run departs from the "
                    "preset (e.g. how the weights reached the device); shown in the table's note")
    ap.add_argument("--timings", type=Path,
                    default=Path("reports/metrics/code_biencoder_gpu/logs/device_runs.json"))
    args = ap.parse_args(argv)
    args.metrics_out.mkdir(parents=True, exist_ok=True)
    args.data_out.mkdir(parents=True, exist_ok=True)
    args.timings.parent.mkdir(parents=True, exist_ok=True)
    got = collect(args.runs, params=args.params, functions=args.functions, splits=args.splits,
                  metrics_in=args.metrics_in, data_in=args.data_in, metrics_out=args.metrics_out,
                  data_out=args.data_out, timings=args.timings, note=args.note)
    for name, m in got.items():
        print(f"{name}: test R@10 {m['rank_at_10']:.2%} over {m['n_seeds']} seeds (val {m['val_rank_at_10']:.2%})")
    return 0


if __name__ == "__main__":
    run_stage(main)
