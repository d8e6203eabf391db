#!/usr/bin/env bash
# Installs and builds only what the quickstart runs (scripts/setup.sh --quickstart: the packages
# that build the air executable, and that one target), then runs the quickstart: a supervised
# fine-tune of a tiny Llama by air's own engine, submitted as a workload to the embedded local
# default (examples/quickstart/train.yaml), watched to the end; then the trained model answers
# the held-out questions. Outputs: build/quickstart/trained (HF checkpoint + metrics.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
T0=$SECONDS
"$ROOT/scripts/setup.sh" --quickstart   # no tests, no Python, no Slurm, no browser
T_SETUP=$SECONDS
AIR="$ROOT/build/bin/air"
OUT="$ROOT/build/quickstart"
mkdir -p "$OUT"

echo "== $AIR run -f examples/quickstart/train.yaml --dry-run"
# Captured, then cut: piping air into `head` could kill it with SIGPIPE (and, with pipefail,
# fail the script) once the plan outgrows a pipe write.
plan=$("$AIR" run -f examples/quickstart/train.yaml --dry-run \
  --override parameters.output_dir="$OUT/trained")
sed -n 1,8p <<<"$plan"

echo "== $AIR run -f examples/quickstart/train.yaml --watch"
"$AIR" run -f examples/quickstart/train.yaml --watch \
  --override parameters.output_dir="$OUT/trained"
T_TRAIN=$SECONDS

echo "== held-out answers of the fine-tuned model"
"$AIR" generate --model "$OUT/trained" --dataset examples/data/tiny_instruct/eval.jsonl \
  --max-new-tokens 24 | tail -n 13
echo "== checkpoint and loss curve: $OUT/trained (config.json, model.safetensors, metrics.jsonl)"
echo "== quickstart took $((SECONDS - T0)) s: setup and build $((T_SETUP - T0)) s, the run" \
  "$((T_TRAIN - T_SETUP)) s, the answers $((SECONDS - T_TRAIN)) s"
