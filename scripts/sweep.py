"""Sweep table across DVC experiments: run ``dvc exp show --json`` and write
``reports/sweep.md`` (the page: :mod:`contrastlab.reporting.sweep`, which knows nothing of how
the JSON was obtained).

    dvc exp run --queue -S 'graph.tune.trials=8,16,32' && dvc exp run --run-all -j 1
    python scripts/sweep.py                 # -> reports/sweep.md
    python scripts/sweep.py -A              # experiments of every commit
    python scripts/sweep.py --json show.json --out /tmp/sweep.md   # a saved output
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from contrastlab.cli import ArgParser, run_stage, text_file
from contrastlab.errors import InputError
from contrastlab.io import write_text
from contrastlab.reporting.sweep import (METRICS_FILE, differing_params, experiment_rows,
                                         render_sweep)


def dvc_executable() -> str:
    """The ``dvc`` beside this interpreter (the project's venv), else the one on PATH.

    Raises:
        InputError: no ``dvc`` found.
    """
    exe = Path(sys.executable).with_name("dvc")
    if exe.exists():
        return str(exe)
    found = shutil.which("dvc")
    if not found:
        raise InputError("dvc not found (install it: pip install -r requirements.txt), or pass "
                         "--json with a saved `dvc exp show --json` output")
    return found


def exp_show_json(repo: str | Path = ".", all_commits: bool = False,
                  timeout: float = 600) -> list[dict[str, Any]]:
    """Run ``dvc exp show --json`` (``-A`` when ``all_commits``) in ``repo`` and parse it.

    Raises:
        InputError: DVC exits non-zero (its message is included) or prints no JSON list.
    """
    if not Path(repo).is_dir():
        raise InputError(f"{repo}: no such folder (--repo names the DVC repository)")
    args = [dvc_executable(), "exp", "show", "--json", *(["-A"] if all_commits else [])]
    try:
        p = subprocess.run(args, cwd=repo, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InputError(f"`dvc exp show --json` in {repo} ran past {timeout:.0f} s") from None
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()[-3:]
        raise InputError(f"`dvc exp show --json` failed in {repo} (exit {p.returncode}): "
                         + " / ".join(msg))
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise InputError(f"`dvc exp show --json` printed no JSON ({e})") from None


def main(argv: list[str] | None = None) -> int:
    """``python scripts/sweep.py``: write ``reports/sweep.md``; exit 0 (also
    when there are no experiments: the page and stderr say so), 2 on bad input."""
    ap = ArgParser(prog="python scripts/sweep.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=".", help="the DVC repository (default: .)")
    ap.add_argument("--out", default=None, help="default: <repo>/reports/sweep.md")
    ap.add_argument("--json", default=None, type=text_file("--json file"),
                    help="read this saved `dvc exp show --json` output instead of running DVC")
    ap.add_argument("-A", "--all-commits", action="store_true",
                    help="experiments of every commit (dvc exp show -A), not only HEAD's")
    ap.add_argument("--workspace", action="store_true", help="add the workspace as a column")
    ap.add_argument("--metrics-file", default=METRICS_FILE)
    ap.add_argument("--digits", type=int, default=None,
                    help="decimals (default: report.digits of the baseline's params, else 4)")
    args = ap.parse_args(argv)
    if args.json:  # text_file has checked that it is a readable UTF-8 file
        try:
            data = json.loads(Path(args.json).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InputError(f"{args.json}: not valid JSON ({e})") from None
    else:
        data = exp_show_json(args.repo, all_commits=args.all_commits)
    rows = experiment_rows(data, args.metrics_file, include_workspace=args.workspace)
    out = Path(args.out) if args.out else Path(args.repo) / "reports" / "sweep.md"
    write_text(out, render_sweep(rows, args.digits, args.metrics_file))
    n = sum(r.kind == "experiment" for r in rows)
    if n == 0:
        print(f"no DVC experiments to compare: queue and run some (dvc exp run --queue -S ...; "
              f"dvc exp run --run-all), then rerun; {out} says so", file=sys.stderr)
    else:
        print(f"{out}: {n} experiment(s), {len(differing_params(rows))} differing param(s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main))
