"""Run a stage script's ``main`` in the test's own process, as its command line would.

A stage script in a new interpreter pays its imports (torch, transformers, pandas: 3 to 6
CPU-seconds on 2 cores) on every call; an end-to-end chain of a dozen stages paid them a dozen
times. Here the script is loaded from its file and its ``main(argv)`` runs through
:func:`contrastlab.cli.run_stage` (the stage's exit status, 2 and a one-line message on bad
input), in ``cwd``, with stdout and stderr captured. What a stage sets for its whole process
(torch's thread count and determinism flag, the working directory) is put back afterwards, so
the tests that follow in the same worker see none of it (torch's settings where the process
had imported torch before the call; each stage that uses torch sets its own threads).

A test on a copy of the project runs the copy's own package in one new interpreter,
:class:`StageServer`, call by call (the test edits files between the calls). Tests of a
script's own interpreter start (its exit status from the shell, a traceback on stderr) run it
as a subprocess instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class StageResult:
    returncode: int
    stdout: str
    stderr: str


def load_script(script: str | Path):
    """The module of the script at ``script`` (a stage, a test's worker), loaded from its file
    as an import would load it, not as ``__main__``."""
    script = Path(script)
    spec = importlib.util.spec_from_file_location(f"_stage_{script.stem}", script)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import would (dataclasses look their module up there)
    spec.loader.exec_module(mod)
    return mod


def stage_main(script: str | Path):
    """The ``main`` of the stage script at ``script``, loaded from its file."""
    return load_script(script).main


def run_stage_here(script: str | Path, argv: list[str], cwd: str | Path,
                   env: dict[str, str | None] | None = None) -> StageResult:
    """``script``'s ``main(argv)`` run in ``cwd`` as ``stages/_dvc.py`` runs it (through
    ``run_stage``, in the invocation DVC's variables describe), with ``env`` set for the call
    (a ``None`` value unsets the variable). ``SystemExit`` gives its status, as the script's
    process would exit; any other non-input exception propagates, as a traceback would end the
    process."""
    import _dvc  # stages/_dvc.py (stages/ is on pytest's pythonpath)

    from contrastlab.cli import run_stage

    main = stage_main(script)
    # torch's settings are put back if this process had torch before the call (a stage that
    # does not use torch does not pay its import here either)
    torch = sys.modules.get("torch")
    old = (os.getcwd(), *((torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
                          if torch else ()))
    saved = {k: os.environ.get(k) for k in env or {}}
    os.chdir(cwd)
    try:
        for k, v in (env or {}).items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        return _captured(lambda: run_stage(lambda: main(list(argv)), _dvc.invocation()))
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        os.chdir(old[0])
        if torch:
            torch.set_num_threads(old[1])
            torch.use_deterministic_algorithms(old[2])


def _captured(call) -> StageResult:
    """``call()``'s value as the exit status, with what it printed; a ``SystemExit`` (a usage
    error from argparse, the script's own ``sys.exit``) gives its status as the interpreter
    would, its message printed to stderr. Other exceptions propagate."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = call()
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)  # as the interpreter prints it
    return StageResult(rc, out.getvalue(), err.getvalue())


def run_main_here(script: str | Path, argv: list[str]) -> StageResult:
    """``python script argv...`` in this process: the script's ``__main__`` block (``runpy``),
    with ``sys.argv`` set and its folder first on ``sys.path`` for the call; exit status as
    :func:`_captured` gives it. For scripts without a ``main(argv)`` (the benchmarks)."""
    import runpy

    old_argv, folder = sys.argv, str(Path(script).resolve().parent)
    sys.argv = [str(script), *argv]
    sys.path.insert(0, folder)

    def call() -> int:
        runpy.run_path(str(script), run_name="__main__")
        return 0

    try:
        return _captured(call)
    finally:
        sys.path.remove(folder)  # the entry added here, wherever the script moved it
        sys.argv = old_argv


class StageServer:
    """One new interpreter that runs script after script, each through :func:`run_stage_here`
    (:meth:`run`) or :func:`run_main_here` (:meth:`run_main`): the imports are paid once, and a
    test that edits files between the calls reads each call's exit status and output before it
    makes the next. It runs in ``cwd`` with ``env`` (a project copy on ``PYTHONPATH`` gets its
    own ``contrastlab``); :meth:`close` ends it.

    Each call's exit status is what the script's own process would exit with: ``main``'s value,
    2 after an input error, a ``SystemExit``'s status, 1 after any other exception (its
    traceback in ``stderr``)."""

    def __init__(self, cwd: str | Path, env: dict[str, str]):
        import subprocess
        import tempfile

        self._log = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen([sys.executable, __file__, "--serve"], cwd=cwd, env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, text=True)

    def run(self, script: str, *argv: str) -> StageResult:
        """``script``'s ``main(argv)``, as :func:`run_stage_here` runs it."""
        return self._call("stage", script, argv)

    def run_main(self, script: str, *argv: str) -> StageResult:
        """``script``'s ``__main__`` block, as :func:`run_main_here` runs it."""
        return self._call("main", script, argv)

    def _call(self, how: str, script: str, argv) -> StageResult:
        import json

        self._proc.stdin.write(json.dumps([how, script, *argv]) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:  # the interpreter itself died
            self._log.seek(0)
            raise RuntimeError(f"stage server ended ({self._proc.wait()}): "
                               f"{self._log.read()[-3000:]}")
        return StageResult(**json.loads(line))

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._log.close()


def _serve() -> None:
    """The :class:`StageServer` side: one JSON line per call on stdin, one JSON line of
    :class:`StageResult` back, on the stdout it started with (anything written to file
    descriptor 1 meanwhile goes to stderr)."""
    import json
    import traceback

    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path.insert(0, str(Path.cwd() / "stages"))  # stages/_dvc.py, for scripts/ too
    for line in sys.stdin:
        how, script, *argv = json.loads(line)
        if how == "stage" and (folder := str(Path(script).resolve().parent)) not in sys.path:
            sys.path.insert(0, folder)  # once, not per call
        try:
            r = (run_stage_here(script, argv, os.getcwd()) if how == "stage"
                 else run_main_here(script, argv))
        except BaseException:  # noqa: BLE001 - a traceback, as the script's process would show
            r = StageResult(1, "", traceback.format_exc())
        reply.write(json.dumps(vars(r)) + "\n")
        reply.flush()


if __name__ == "__main__":  # ``python tests/_stagerun.py --serve``: the StageServer side
    _serve()
