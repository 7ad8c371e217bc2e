#!/usr/bin/env bash
# System packages the test suite and the pipeline use, installed from Debian when missing:
#   chromium + chromium-driver  headless browser for the report's browser tests
#   bubblewrap (bwrap)          the sandbox that runs untrusted HumanEval / student code
#   postgresql                  a throwaway server for the shared-study and MLflow tests
# `--no-browser` leaves chromium out (scripts/env.sh, for the pipeline alone).
# Idempotent: nothing is installed when the commands are already there. Needs root or
# passwordless sudo; otherwise it says what is missing (the tests that need it then fail in CI
# and skip elsewhere, saying why).
set -uo pipefail
need=()
if [ "${1:-}" != --no-browser ]; then
  { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; } || need+=(chromium chromium-driver)
fi
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "warning: not root and no passwordless sudo; missing system packages: ${need[*]}" >&2; exit 0; fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "warning: apt-get not found; missing system packages: ${need[*]}" >&2; exit 0
fi
echo "installing ${need[*]} (Debian packages)"
export DEBIAN_FRONTEND=noninteractive
T=""; command -v timeout >/dev/null 2>&1 && T="timeout 900"
{ $T $SUDO apt-get install -y -qq "${need[@]}" ||
  { $T $SUDO apt-get update -qq && $T $SUDO apt-get install -y -qq "${need[@]}"; }; } >/dev/null 2>&1 ||
  echo "warning: could not install ${need[*]}" >&2
exit 0
