"""Run a stage script's ``main`` in the test's own process, as its command line would.

A stage script in a new interpreter pays its imports (torch, transformers, pandas: 3 to 6
CPU-seconds on 2 cores) on every call; an end-to-end chain of a dozen stages paid them a dozen
times. Here the script is loaded from its file and its ``main(argv)`` runs through
:func:`contrastlab.cli.run_stage` (the stage's exit status, 2 and a one-line message on bad
input), in ``cwd``, with stdout and stderr captured. What a stage sets for its whole process
(torch's thread count and determinism flag, the working directory) is put back afterwards, so
the tests that follow in the same worker see none of it. Tests of a script's own interpreter
start (its exit status from the shell, a traceback on stderr) run it as a subprocess instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StageResult:
    returncode: int
    stdout: str
    stderr: str


def stage_main(script: str | Path):
    """The ``main`` of the stage script at ``script``, loaded from its file."""
    script = Path(script)
    spec = importlib.util.spec_from_file_location(f"_stage_{script.stem}", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def run_stage_here(script: str | Path, argv: list[str], cwd: str | Path,
                   env: dict[str, str | None] | None = None) -> StageResult:
    """``script``'s ``main(argv)`` run in ``cwd`` as ``stages/_dvc.py`` runs it (through
    ``run_stage``, in the invocation DVC's variables describe), with ``env`` set for the call
    (a ``None`` value unsets the variable); a non-input exception propagates, as a traceback
    would end the process."""
    import _dvc  # stages/_dvc.py (stages/ is on pytest's pythonpath)
    import torch

    from contrastlab.cli import run_stage

    main = stage_main(script)
    out, err = io.StringIO(), io.StringIO()
    old = (os.getcwd(), torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    saved = {k: os.environ.get(k) for k in env or {}}
    os.chdir(cwd)
    try:
        for k, v in (env or {}).items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = run_stage(lambda: main(list(argv)), _dvc.invocation())
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        os.chdir(old[0])
        torch.set_num_threads(old[1])
        torch.use_deterministic_algorithms(old[2])
    return StageResult(rc, out.getvalue(), err.getvalue())


if __name__ == "__main__":
    # ``python tests/_stagerun.py '[["stages/a.py", "--x", "1"], ...]'``: several stages one
    # after another in one new interpreter (the imports paid once), in the working directory,
    # each with the ``contrastlab`` and ``stages/_dvc.py`` found from there (a copy of the
    # project on PYTHONPATH gets its own); stops at the first nonzero status, which it exits with.
    import json
    import sys

    for script, *argv in json.loads(sys.argv[1]):
        sys.path.insert(0, str(Path(script).resolve().parent))
        r = run_stage_here(script, argv, os.getcwd())
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode:
            sys.exit(r.returncode)
