"""Issue 39: every benchmark in bench/ runs in its quickest mode (``--smoke``: tiny sizes, one
repeat), so a refactor cannot break one silently (as the params refactor broke
bench_graph.py's part 3 with ``'GraphParams' object has no attribute 'active_preset'``).

Each script runs as ``python bench/<name>.py --smoke`` in a subprocess (its real entry
point) with one thread; the test checks exit status 0, no traceback and that it printed its
result line (a ratio: ``x`` or ``|``). Timing values are not checked (a smoke run measures
nothing)."""

from __future__ import annotations

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


@pytest.mark.parametrize("name", BENCHES)
def test_benchmark_runs_in_smoke_mode(name, tmp_path):
    extra = ["--threads", "1"] if name != "bench_coverage.py" else []
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CONTRASTLAB_MLFLOW": "0"}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / name), "--smoke", *extra],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert "x" in out.stdout or "|" in out.stdout, out.stdout
