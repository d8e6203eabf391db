#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs every test: the C++ unit tests (ctest) and the
# Python integration and parity tests (pytest, against the real torch/transformers/tokenizers
# in the project venv). Exit status is non-zero if any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
"$ROOT/scripts/setup.sh"
VENV=$("$ROOT/scripts/venv.sh")
export AIR_BIN="$ROOT/build/bin/air"
export AIR_VENV="$VENV"

status=0
echo "== unit tests (ctest)"
ctest --test-dir "$ROOT/build" --output-on-failure --parallel "$(nproc)" --timeout 600 || status=1

echo "== integration and parity tests (pytest)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/tests/python" "$@" || status=1

if [ "$status" -ne 0 ]; then
  echo "== FAILED: see the failures above" >&2
fi
exit "$status"
