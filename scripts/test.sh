#!/usr/bin/env bash
# README command 2: create the environment if needed, then run the test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/losses -x`).
# The suite runs on CONTRASTLAB_TEST_WORKERS pytest-xdist workers (default: one per core, at
# most 4), each test file on one worker (--dist loadfile: a module's fixtures are built once);
# CONTRASTLAB_TEST_WORKERS=0 runs it in this process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/env.sh
bash scripts/system_deps.sh   # chromium (browser tests), bubblewrap, postgresql: the whole suite runs
export PATH="$PWD/.venv/bin:$PATH"
workers=${CONTRASTLAB_TEST_WORKERS:-$(python -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')}
if [ "$workers" -gt 0 ]; then
  exec python -m pytest -n "$workers" --dist loadfile "$@"
fi
exec python -m pytest "$@"
