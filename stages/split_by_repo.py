"""DVC stage ``split_by_repo``: train / val / test by repository (no repository in two splits).

Writes ``data/code/splits.parquet`` (``id, repo, split``) and ``data/code/splits.json``.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from contrastlab.cli import run_stage
from contrastlab.data.splits import split_by_repository, split_summary
from contrastlab.io import write_json, write_parquet
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--functions", default="data/code/functions.parquet")
    ap.add_argument("--out", default="data/code/splits.parquet")
    ap.add_argument("--summary", default="data/code/splits.json")
    args = ap.parse_args(argv)
    s = load_params(args.params).code.split
    df = pd.read_parquet(args.functions, columns=["id", "repo"])
    sizes = df["repo"].value_counts().to_dict()
    assign = split_by_repository(sizes, (s.train, s.val, s.test), seed=s.seed)
    df["split"] = df["repo"].map(assign)
    write_parquet(args.out, df)
    summary = split_summary(df)
    write_json(args.summary, summary)
    print("split_by_repo: " + ", ".join(f"{k} {v['functions']} functions / "
                                         f"{len(v['repositories'])} repos" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
