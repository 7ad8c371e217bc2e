#!/usr/bin/env bash
# Create (or refresh) the project environment in .venv, idempotently.
# Reinstalls only when requirements.txt or pyproject.toml changed since the last install.
# Needs no network beyond the Python package index.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.contrastlab-installed
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  # torch first and pinned: an unpinned torch would pull CUDA wheels.
  .venv/bin/python -m pip install --quiet "$(grep -E '^torch==' requirements.txt)"
  .venv/bin/python -m pip install --quiet -r requirements.txt
  .venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
fi
# bubblewrap (a system package) sandboxes the HumanEval variants; best effort, never fatal.
if ! command -v bwrap >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  if command -v apt-get >/dev/null 2>&1 &&
     DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null 2>&1; then
    echo "installed bubblewrap"
  else
    echo "warning: bubblewrap (bwrap) is not installed and could not be installed here;" \
         "the humaneval stage will refuse to run untrusted code (apt-get install bubblewrap)" >&2
  fi
fi
# PostgreSQL server binaries (a system package) for the scale-out tests and a local shared
# study / MLflow store (docs/scaleout.md); best effort, never fatal.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  if command -v apt-get >/dev/null 2>&1 &&
     DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null 2>&1; then
    echo "installed postgresql"
  else
    echo "warning: PostgreSQL (initdb) is not installed and could not be installed here;" \
         "tests/protocol/test_postgres.py will skip (apt-get install postgresql)" >&2
  fi
fi
