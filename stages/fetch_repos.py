"""DVC stage ``fetch_repos``: copy the code track's repository sources into data/code/repos.

One folder per repository plus ``manifest.json`` (source, version or commit, number of
files, licence file). Sources are listed in ``params.yaml`` under ``code.repos.sources`` and ``code.repos.dists``.
"""

from pathlib import Path

from _dvc import run

from contrastlab.cli import stage_parser
from contrastlab.data.repos import fetch_sources
from contrastlab.io import atomic_dir, write_json
from contrastlab.params import load_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__, "--out")
    args = ap.parse_args(argv)
    p = load_params(args.params).code
    with atomic_dir(Path(args.out)) as tmp:
        manifest = fetch_sources(p.repos.all_sources, tmp)
        write_json(tmp / "manifest.json", manifest)
    n = sum(e["files"] for e in manifest["repositories"])
    print(f"fetch_repos: {len(manifest['repositories'])} repositories, {n} Python files -> {args.out}")
    return 0


if __name__ == "__main__":
    run(main)
