"""DVC stage ``report``: render every track's comparison into ``reports/``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contrastlab.cli import run_stage
from contrastlab.io import write_text
from contrastlab.params import load_params, params_hash
from contrastlab.reporting import collect_sections, render_markdown
from contrastlab.tracking import stage_run
from contrastlab.utils import git_commit, repo_root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out-dir", default="reports")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    root = repo_root()
    out = Path(args.out_dir)
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    with stage_run("report", "report", params.report):
        sections = collect_sections(root, figures)
        header = (f"Generated from git commit `{git_commit(root)}`, "
                  f"params hash `{params_hash(params)}`.")
        for s in sections:
            for f in s.figures:
                f.path = Path(f.path).resolve().relative_to(out.resolve())
        write_text(out / "comparison.md", render_markdown(sections, header))
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
