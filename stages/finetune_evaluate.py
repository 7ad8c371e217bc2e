"""DVC stage ``finetune_evaluate``: the per-query tier metrics from the embeddings.

The within-problem tier comparison's per-query arrays
(:func:`contrastlab.finetune.evaluate.tier_arrays`: same-tier AUC, nearest same-problem
neighbour's tier, one-token mutants of another tier, with the tier-blind reference and the
ceiling as rows) are computed from every row's stored embeddings
(``data/finetune/runs/<row>/``). The tables with their intervals and tests are stage
``finetune_summary``'s, from these arrays: a change of the statistics reruns that stage alone.
The query index is stage ``finetune_index``'s.

Output: ``reports/metrics/finetune/tier_items.npz`` (``<row>/<split>/<metric>`` ``[S, Q]``;
committed).
"""

import io
from pathlib import Path

import numpy as np
import pandas as pd

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.finetune.evaluate import tier_arrays
from contrastlab.io import atomic_path
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--data", "--metrics-dir", "--runs-dir")
    args = ap.parse_args(argv)
    ft = load_params(args.params).finetune
    df = pd.read_parquet(args.data)
    tier_items = tier_arrays(ft, df, args.runs_dir, args.metrics_dir)
    with atomic_path(Path(args.metrics_dir) / "tier_items.npz") as tmp:
        buf = io.BytesIO()
        np.savez_compressed(buf, **tier_items)
        Path(tmp).write_bytes(buf.getvalue())
    print(f"finetune_evaluate: {len(tier_items)} per-query arrays")
    return 0


if __name__ == "__main__":
    run(main)
