"""Issue 39: every benchmark in bench/ runs in its quickest mode (``--smoke``: tiny sizes, one
repeat), so a refactor cannot break one silently (as the params refactor broke
bench_graph.py's part 3 with ``'GraphParams' object has no attribute 'active_preset'``).

Each script runs as ``python bench/<name>.py --smoke`` would (its ``__main__`` block, with
one thread), all of them one after another in one new interpreter (``StageServer.run_main``,
tests/_stagerun.py); the test checks each one's exit status 0, no traceback and that it
printed its result line (a ratio: ``x`` or ``|``). Timing values are not checked (a smoke run
measures nothing)."""

from __future__ import annotations

import os

import pytest
from _stagerun import StageServer

from contrastlab.utils import repo_root

ROOT = repo_root()
BENCHES = sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))


def test_every_benchmark_has_a_smoke_flag():
    assert BENCHES, "no benchmarks found"
    for name in BENCHES:
        assert '"--smoke"' in (ROOT / "bench" / name).read_text(encoding="utf-8"), name


@pytest.mark.slow
def test_every_benchmark_runs_in_smoke_mode():
    """All benchmarks in one new interpreter (their imports paid once: a new interpreter per
    benchmark cost about 25 CPU-seconds more on 2 cores), each through its ``__main__`` block
    with its own argv, output and exit status."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CONTRASTLAB_MLFLOW": "0"}
    server = StageServer(ROOT, env)
    try:
        res = {n: server.run_main(str(ROOT / "bench" / n), "--smoke",
                                  *(["--threads", "1"] if n != "bench_coverage.py" else []))
               for n in BENCHES}
    finally:
        server.close()
    for name, out in res.items():
        assert out.returncode == 0, (name, out.stderr[-3000:])
        assert "Traceback" not in out.stderr, (name, out.stderr[-3000:])
        assert "x" in out.stdout or "|" in out.stdout, (name, out.stdout)
