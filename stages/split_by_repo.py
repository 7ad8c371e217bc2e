"""DVC stage ``split_by_repo``: train / val / test by repository group, no leakage.

Repositories that ship the same top-level package or share a name family are one group
(``mlflow`` / ``mlflow-skinny``, ``dvc`` / ``dvc-data``, ``opentelemetry-*``); near-duplicate
bodies (MinHash LSH on token shingles, Jaccard >= ``code.split.near_dup_threshold``) are
grouped before the split and a member landing in another split than its group's first
member is marked ``excluded`` (kept in the corpus, never trained on or queried).

Writes ``data/code/splits.parquet`` (``id, repo, repo_group, dup_group, split``) and
``data/code/splits.json`` (counts, repositories and groups per split).
"""

import pandas as pd

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.data.splits import split_functions
from contrastlab.io import write_json, write_parquet
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--functions", "--out", "--summary")
    args = ap.parse_args(argv)
    df = pd.read_parquet(args.functions, columns=["id", "repo", "path", "body"])
    out, summary = split_functions(df, load_params(args.params).code.split)
    write_parquet(args.out, out)
    write_json(args.summary, summary)
    print("split_by_repo: " + ", ".join(
        f"{k} {summary[k]['functions']} functions / {len(summary[k]['repositories'])} repos"
        for k in ("train", "val", "test", "excluded")))
    return 0


if __name__ == "__main__":
    run(main)
