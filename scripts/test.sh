#!/usr/bin/env bash
# README command 2: create the environment if needed, then run the test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/losses -x`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/env.sh
bash scripts/system_deps.sh   # chromium (browser tests), bubblewrap, postgresql: the whole suite runs
export PATH="$PWD/.venv/bin:$PATH"
exec python -m pytest "$@"
