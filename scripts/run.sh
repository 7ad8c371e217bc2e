#!/usr/bin/env bash
# README command 1: create the environment if needed, then run the default pipeline.
# Extra arguments go to `dvc repro` (e.g. `bash scripts/run.sh report`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/env.sh
export PATH="$PWD/.venv/bin:$PATH"
exec dvc repro "$@"
