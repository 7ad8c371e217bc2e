#!/usr/bin/env bash
# README command 2: create the environment if needed, then run the test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/losses -x`).
# The suite runs on CONTRASTLAB_TEST_WORKERS pytest-xdist workers (default: one per core plus
# one, at most 4, since many tests wait on a server, a sandbox or a child process), tests handed
# out one by one and taken over from a busy worker by an idle one (--dist worksteal: the long
# end-to-end tests do not queue behind each other). Measured on 2 cores: 1,298 tests, 3 workers
# 9 min 50 s, 2 workers 10 min 22 s, serially about 16 min; on a clean clone (.ci/run, 2026-11-29)
# 1,347 tests in 9 min 17 s with 3 workers, after ruamel.yaml's C parser halved every dvc
# command's time (12 min 58 s before it). 2026-11-29, idle: 1,366 tests in 9 min 27 s in the
# working checkout and 13 min 27-37 s on a clean clone (the same tests took ~40 % more CPU time
# there), after scripts/stage_deps.py stopped re-parsing every file for every stage. 2026-11-30,
# idle, another machine: 1,367 tests in 6 min 56 s on a clean clone, 6 min 48 s in a checkout.
# 2026-12-01, idle, an AMD EPYC machine with AVX2 only: 1,389 tests in 14 min 59 s on a clean clone.
# The same machine after tests/conftest.py set one BLAS/OpenMP thread per test process (the
# workers' second threads only spun): 10 min 25 s to 11 min 13 s on a clean clone (four runs).
# CONTRASTLAB_TEST_WORKERS=0 runs it in this process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/env.sh
bash scripts/system_deps.sh   # chromium (browser tests), bubblewrap, postgresql: the whole suite runs
export PATH="$PWD/.venv/bin:$PATH"
workers=${CONTRASTLAB_TEST_WORKERS:-$(python -c 'import os; print(min(4, len(os.sched_getaffinity(0)) + 1))')}
if [ "$workers" -gt 0 ]; then
  exec python -m pytest -n "$workers" --dist worksteal "$@"
fi
exec python -m pytest "$@"
