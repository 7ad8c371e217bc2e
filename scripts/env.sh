#!/usr/bin/env bash
# Create (or refresh) the project environment in .venv, idempotently.
# Reinstalls only when requirements.txt, constraints.txt or pyproject.toml changed since the
# last install.
# Needs no network beyond the Python package index.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.contrastlab-installed
want=$(cat requirements.txt constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # constraints.txt pins every distribution (pip and setuptools included): their sources are
  # the code-retrieval corpus, so a newer release of any of them would change the code track.
  .venv/bin/python -m pip install --quiet "$(grep -E '^pip==' constraints.txt)" >/dev/null 2>&1 || true
  # torch first and pinned: an unpinned torch would pull CUDA wheels.
  .venv/bin/python -m pip install --quiet "$(grep -E '^torch==' requirements.txt)"
  .venv/bin/python -m pip install --quiet -r requirements.txt -c constraints.txt
  .venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
fi
# bubblewrap (the sandbox for untrusted code) and PostgreSQL (shared studies, docs/scaleout.md):
# system packages, installed when missing; best effort, never fatal.
bash scripts/system_deps.sh --no-browser
