"""DVC stage ``split_by_repo``: train / val / test by repository group, no leakage.

Repositories that ship the same top-level package or share a name family are one group
(``mlflow`` / ``mlflow-skinny``, ``dvc`` / ``dvc-data``, ``opentelemetry-*``); near-duplicate
bodies (MinHash LSH on token shingles, Jaccard >= ``code.split.near_dup_threshold``) are
grouped before the split and a member landing in another split than its group's first
member is marked ``excluded`` (kept in the corpus, never trained on or queried).

Writes ``data/code/splits.parquet`` (``id, repo, repo_group, dup_group, split``) and
``data/code/splits.json`` (counts, repositories and groups per split).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from contrastlab.cli import run_stage
from contrastlab.data.splits import (assign_splits, near_duplicate_groups, repository_groups,
                                     split_summary, top_level_names)
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
    df = pd.read_parquet(args.functions, columns=["id", "repo", "path", "body"]).sort_values("id")
    df = df.reset_index(drop=True)
    tops = {r: top_level_names(g["path"]) for r, g in df.groupby("repo")}
    groups = repository_groups(tops, stop=s.family_stop)
    dup = near_duplicate_groups(df["body"].tolist(), s.near_dup_threshold, s.shingle, s.num_perm)
    split = assign_splits(df["repo"].to_numpy(), groups, dup, (s.train, s.val, s.test), s.seed)
    out = pd.DataFrame({"id": df["id"].to_numpy(), "repo": df["repo"].to_numpy(),
                        "repo_group": [groups[r] for r in df["repo"]],
                        "dup_group": df["id"].to_numpy()[dup], "split": split.astype(str)})
    write_parquet(args.out, out)
    summary = split_summary(out)
    for k, v in summary.items():
        v["repository_groups"] = int(out.loc[out["split"] == k, "repo_group"].nunique())
    summary["near_duplicates"] = {
        "functions_in_groups": int((np.bincount(dup, minlength=len(dup))[dup] > 1).sum()),
        "groups": int(sum(1 for c in np.bincount(dup) if c > 1))}
    summary["joined_repositories"] = {g: sorted(r for r, gg in groups.items() if gg == g)
                                      for g in sorted(set(groups.values()))
                                      if sum(1 for gg in groups.values() if gg == g) > 1}
    write_json(args.summary, summary)
    print("split_by_repo: " + ", ".join(
        f"{k} {summary[k]['functions']} functions / {len(summary[k]['repositories'])} repos"
        for k in ("train", "val", "test", "excluded")))
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
