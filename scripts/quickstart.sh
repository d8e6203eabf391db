#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the quickstart workload on the embedded
# local default. Until the engine lands, the quickstart shows the dry-run plans of the example
# workloads.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
AIR_SKIP_VENV=${AIR_SKIP_VENV:-1} "$ROOT/scripts/setup.sh"
AIR="$ROOT/build/bin/air"
for f in examples/*/train.yaml; do
  echo "== $AIR run -f $f --dry-run"
  "$AIR" run -f "$f" --dry-run
done
