"""DVC stage ``fetch_cora``: verify the vendored Planetoid Cora files and prepare them for PyG.

Checks ``data/vendor/planetoid/Cora/raw/*`` against ``SHA256SUMS``, copies them to
``data/graph/planetoid/Cora/raw/`` (where ``torch_geometric.datasets.Planetoid`` reads
them) and loads the data set once offline, which writes ``processed/``. With
``graph.source: download`` PyG's own loader fetches the files instead (needs network).
"""

from __future__ import annotations

import argparse
import sys

from contrastlab.cli import run_stage
from contrastlab.data.cora import prepare_cora
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--vendor", default="data/vendor/planetoid/Cora")
    ap.add_argument("--out", default="data/graph/planetoid")
    args = ap.parse_args(argv)
    p = load_params(args.params).graph
    stats = prepare_cora(args.vendor, args.out, source=p.source)
    print("Cora:", ", ".join(f"{k}={v}" for k, v in stats.items()))
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
