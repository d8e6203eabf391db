#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the quickstart: a supervised fine-tune of a
# tiny Llama by air's own engine, submitted as a workload to the embedded local default
# (examples/quickstart/train.yaml), watched to the end; then the trained model answers the
# held-out questions. Outputs: build/quickstart/trained (HF checkpoint + metrics.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
AIR_SKIP_VENV=${AIR_SKIP_VENV:-1} "$ROOT/scripts/setup.sh"   # the quickstart needs no Python
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

echo "== held-out answers of the fine-tuned model"
"$AIR" generate --model "$OUT/trained" --dataset examples/data/tiny_instruct/eval.jsonl \
  --max-new-tokens 24 | tail -n 13
echo "== checkpoint and loss curve: $OUT/trained (config.json, model.safetensors, metrics.jsonl)"
