"""DVC stage ``multilabel_weights@<dataset>``: the Sim-Dis weights K^s K^d by relation R1..R5.

Measured on the training labels: for a seeded sample of ``--max-samples`` training rows,
every (anchor, other sample) pair's relation type (paper Eq. 8-12, R1 disjoint, R2 equal,
R3 partial overlap, R4 anchor superset, R5 anchor subset) and its weight K^s K^d
(Eq. 14-15), both from ``contrastlab.losses.simdis``. Writes a histogram table
``reports/data/multilabel/<dataset>_simdis_weights.csv`` (relation, bin_left, bin_right,
count) and per-relation summaries ``<dataset>_simdis_relations.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from contrastlab.cli import run_stage
from contrastlab.io import write_csv, write_json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--data-dir", default="data/multilabel")
    ap.add_argument("--out-dir", default="reports/data/multilabel")
    ap.add_argument("--max-samples", type=int, default=1500)
    ap.add_argument("--bins", type=int, default=20)
    args = ap.parse_args(argv)
    import pandas as pd
    import torch
    from safetensors.torch import load_file

    from contrastlab.losses.simdis import relation_types, simdis_weights

    path = Path(args.data_dir) / args.dataset / "data.safetensors"
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (run build_multilabel@{args.dataset} first)")
    y = load_file(str(path))["y_train"].float()
    if len(y) > args.max_samples:
        g = torch.Generator().manual_seed(0)
        y = y[torch.randperm(len(y), generator=g)[: args.max_samples]]
    rel = relation_types(y)
    w = simdis_weights(y)
    off = ~torch.eye(len(y), dtype=torch.bool)  # a sample with itself is not a pair
    rel, w = rel[off].numpy(), w[off].numpy()
    edges = np.linspace(0.0, 1.0, args.bins + 1)
    rows, summary = [], {"n_samples": int(len(y)), "n_pairs": int(len(rel))}
    for r in range(1, 6):
        m = rel == r
        counts, _ = np.histogram(w[m], bins=edges)
        for i, c in enumerate(counts):
            rows.append({"relation": f"R{r}", "bin_left": edges[i], "bin_right": edges[i + 1], "count": int(c)})
        summary[f"R{r}_pairs"] = int(m.sum())
        summary[f"R{r}_fraction"] = float(m.mean()) if len(m) else 0.0
        summary[f"R{r}_weight_mean"] = float(w[m].mean()) if m.any() else float("nan")
    write_csv(Path(args.out_dir) / f"{args.dataset}_simdis_weights.csv", pd.DataFrame(rows))
    write_json(Path(args.out_dir) / f"{args.dataset}_simdis_relations.json",
               {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in summary.items()})
    print(f"{args.dataset}: " + ", ".join(f"R{r} {summary[f'R{r}_fraction']:.3f}" for r in range(1, 6)))
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
