"""Recompute the fine-tuning track's statistics from its committed per-query arrays, without
the embeddings: ``reports/metrics/finetune/summary.json`` as stage ``finetune_evaluate``
writes it (:func:`contrastlab.finetune.evaluate.summarize_variants` over ``items/<row>.npz``,
:func:`contrastlab.finetune.evaluate.tier_summary` over ``tier_items.npz``), for a change of the
statistics alone (the intervals, the tests, the draws). The FAISS index is not touched.

    python scripts/finetune_restat.py --data data/finetune/humaneval/variants.parquet \
        --metrics-dir reports/metrics/finetune

``--data`` is stage ``finetune_data``'s table (``dvc repro finetune_data``: minutes, no
training). The stage's own rerun (``dvc repro finetune_evaluate``) writes the same tables.

The GPU table (``reports/metrics/finetune_gpu/``, made outside the pipeline; no tier arrays)
is recomputed the same way under its preset, keeping the summary's ``device`` record::

    python scripts/finetune_restat.py --data data/finetune/humaneval/variants.parquet \
        --metrics-dir reports/metrics/finetune_gpu --preset presets/finetune-gpu.yaml
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from contrastlab.finetune.evaluate import summarize_variants, tier_summary
from contrastlab.io import write_json
from contrastlab.params.presets import load_with_overrides


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--metrics-dir", required=True, type=Path)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--preset", action="append", default=[], help="preset merged over --params")
    a = ap.parse_args(argv)
    ft = load_with_overrides(a.params, a.preset).finetune
    df = pd.read_parquet(a.data)
    out = summarize_variants(ft, df, a.metrics_dir)
    old = a.metrics_dir / "summary.json"
    if old.exists() and "device" in (prev := json.loads(old.read_text())):
        out["device"] = prev["device"]  # where a table made outside the pipeline ran
    if (a.metrics_dir / "tier_items.npz").exists():
        items: dict[str, dict[str, np.ndarray]] = {}
        with np.load(a.metrics_dir / "tier_items.npz") as z:
            for k in z.files:
                row, key = k.split("/", 1)
                items.setdefault(row, {})[key] = z[k]
        out["tier"] = tier_summary(ft, df, items)
    write_json(a.metrics_dir / "summary.json", out)
    print(f"wrote {a.metrics_dir / 'summary.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
