#!/usr/bin/env bash
# README command 2: create the environment if needed, then run the test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/losses -x`).
# The suite runs on CONTRASTLAB_TEST_WORKERS pytest-xdist workers (default: one per core plus
# one, at most 4, since many tests wait on a server, a sandbox or a child process), tests handed
# out a module at a time (--dist loadscope), the modules with the most tests marked `slow` first
# (tests/conftest.py): the long end-to-end tests start early, on every worker, and the run ends
# on short tests instead of one worker's queue of long ones. Measured times on clean clones are in
# docs/usage.md ("Tests and benchmarks"): 9 min 9 s to 9 min 53 s in the last fourteen runs on an AMD
# EPYC machine with 2 cores (2026-12-01/02), 6 min 56 s on another machine type (2026-11-30).
# CONTRASTLAB_TEST_WORKERS=0 runs it in this process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/env.sh
bash scripts/system_deps.sh   # chromium (browser tests), bubblewrap, postgresql: the whole suite runs
export PATH="$PWD/.venv/bin:$PATH"
# the suite starts some 300 interpreters (stages, servers, torchrun ranks, pytest workers):
# let them cache the project's bytecode in its (git-ignored) __pycache__ folders, as Python does
# by default, rather than compile src/, tests/ and the assertion rewrites in every one of them
unset PYTHONDONTWRITEBYTECODE
workers=${CONTRASTLAB_TEST_WORKERS:-$(python -c 'import os; print(min(4, len(os.sched_getaffinity(0)) + 1))')}
if [ "$workers" -gt 0 ]; then
  exec python -m pytest -n "$workers" --dist loadscope --no-loadscope-reorder "$@"
fi
exec python -m pytest "$@"
