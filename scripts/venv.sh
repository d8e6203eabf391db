#!/usr/bin/env bash
# Creates (once) and prints the path of the Python venv the tests and benchmarks use:
# $AIR_VENV_ROOT/venv-<hash of python/requirements-dev.txt>. A venv is reused only when its
# install completed (marker file .complete), so an interrupted install is redone. Concurrent
# callers (two clones, two CI jobs) take turns on a lock file: the second one waits for the
# first install instead of deleting it half-way and starting its own.
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=python/requirements-dev.txt
ROOT_DIR=${AIR_VENV_ROOT:-$HOME/.cache/air}
HASH=$(sha256sum "$REQ" | cut -c1-16)
VENV=$ROOT_DIR/venv-$HASH
if [ ! -f "$VENV/.complete" ]; then
  mkdir -p "$ROOT_DIR"
  exec 9>"$VENV.lock"
  flock 9
fi
if [ ! -f "$VENV/.complete" ]; then
  echo "venv: creating $VENV (first time only; torch is large)" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >&2
  "$VENV/bin/pip" install -q -r "$REQ" >&2
  touch "$VENV/.complete"
fi
echo "$VENV"
