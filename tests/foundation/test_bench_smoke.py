"""Issue 39: every benchmark in bench/ runs in its quickest mode (``--smoke``: tiny sizes, one
repeat), so a refactor cannot break one silently (as the params refactor broke
bench_graph.py's part 3 with ``'GraphParams' object has no attribute 'active_preset'``).

Each script runs as ``python bench/<name>.py --smoke`` would (its ``__main__`` block, with
one thread), all of them one after another in one subprocess; the test checks each one's exit
status 0, no traceback and that it printed its result line (a ratio: ``x`` or ``|``). Timing values are not checked (a smoke run measures
nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from contrastlab.utils import repo_root

ROOT = repo_root()
BENCHES = sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))


def test_every_benchmark_has_a_smoke_flag():
    assert BENCHES, "no benchmarks found"
    for name in BENCHES:
        assert '"--smoke"' in (ROOT / "bench" / name).read_text(encoding="utf-8"), name


#: Runs each ``[script, *args]`` of argv[1] (JSON) as ``python script args`` would (its
#: ``__main__`` block, through runpy, its folder first on sys.path) one after another in this
#: interpreter; writes ``{script: {rc, stdout, stderr}}`` to argv[2].
DRIVER = r"""
import contextlib, io, json, os, runpy, sys, traceback
res, (runs, dest) = {}, sys.argv[1:3]
for path, *args in json.loads(runs):
    out, err, rc = io.StringIO(), io.StringIO(), 0
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path))
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            rc = 1
    sys.path.pop(0)
    res[os.path.basename(path)] = {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}
with open(dest, "w") as f:
    json.dump(res, f)
"""


@pytest.mark.slow
def test_every_benchmark_runs_in_smoke_mode(tmp_path):
    """All benchmarks in one new interpreter (their imports paid once: a new interpreter per
    benchmark cost about 25 CPU-seconds more on 2 cores), each through its ``__main__`` block
    with its own argv, output and exit status."""
    runs = [[str(ROOT / "bench" / n), "--smoke", *(["--threads", "1"] if n != "bench_coverage.py" else [])]
            for n in BENCHES]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CONTRASTLAB_MLFLOW": "0"}
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(runs), str(tmp_path / "out.json")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "out.json").read_text())
    assert sorted(res) == BENCHES
    for name, out in res.items():
        assert out["rc"] == 0, (name, out["stderr"][-3000:])
        assert "Traceback" not in out["stderr"], (name, out["stderr"][-3000:])
        assert "x" in out["stdout"] or "|" in out["stdout"], (name, out["stdout"])
