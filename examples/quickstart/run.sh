#!/usr/bin/env bash
# The engine quickstart, end to end on a CPU (a few minutes on 2 cores), from the repository root:
#   1. `air model init`: a random tiny Llama (model.yaml) with the shipped tokenizer;
#   2. `air generate --dataset`: its answers on the held-out split (noise);
#   3. `air train`: fine-tune on the shipped instruction set (train_config.yaml);
#   4. `air generate --dataset`: the answers again, and one prompt (a word it never saw) streamed.
# Outputs go to build/quickstart/ (or $QUICKSTART_OUT): the models, metrics.jsonl (loss curve).
set -euo pipefail
cd "$(dirname "$0")/../.."
AIR=${AIR:-build/bin/air}
OUT=${QUICKSTART_OUT:-build/quickstart}
EVAL=examples/data/tiny_instruct/eval.jsonl

"$AIR" model init --config examples/quickstart/model.yaml --out "$OUT/model" \
  --tokenizer examples/data/tiny_instruct/tokenizer --seed 0 --force
echo "== held-out answers before training (first 4)"
"$AIR" generate --model "$OUT/model" --dataset "$EVAL" --limit 4 --max-new-tokens 24
echo "== training"
"$AIR" train --config examples/quickstart/train_config.yaml \
  --set model_name="$OUT/model" --set output_dir="$OUT/trained"
echo "== held-out answers after training"
"$AIR" generate --model "$OUT/trained" --dataset "$EVAL" --max-new-tokens 24 | tail -n 13
echo "== one prompt, streamed"
"$AIR" generate --model "$OUT/trained" --max-new-tokens 24 \
  --prompt $'### Instruction:\nReverse the letters of the word.\n\n### Input:\nkolabe\n\n### Response:\n'
