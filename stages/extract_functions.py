"""DVC stage ``extract_functions``: functions of the fetched repositories (``ast`` only).

Writes ``data/code/functions.parquet`` (one row per kept function) and
``data/code/functions_stats.json`` (counts per repository and per skip reason).
"""

from pathlib import Path

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.data.functions import extract_repositories
from contrastlab.errors import InputError
from contrastlab.io import read_json, write_json, write_parquet
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--repos", "--out", "--stats")
    args = ap.parse_args(argv)
    e = load_params(args.params).code.extract
    repos = Path(args.repos)
    manifest = read_json(repos / "manifest.json")
    names = [r["name"] for r in manifest["repositories"]]
    df, stats = extract_repositories(
        repos, names, include_docstring=e.include_docstring, min_body_lines=e.min_body_lines,
        max_body_lines=e.max_body_lines, max_body_chars=e.max_body_chars,
        skip_tests=e.skip_tests, max_functions_per_repo=e.max_functions_per_repo, seed=e.seed,
        workers=e.workers)
    if len(df) == 0:
        raise InputError(f"{repos}: no function passed the filters (see code.extract)")
    write_parquet(args.out, df)
    write_json(args.stats, stats)
    print(f"extract_functions: {stats['functions']} functions from {stats['repositories']} "
          f"repositories; skipped {stats['skipped']}")
    return 0


if __name__ == "__main__":
    run(main)
