#!/usr/bin/env python3
"""Training throughput: `air train` vs PyTorch + transformers on the same model, data and CPU.

Both sides train the same random-initialized Llama (saved once by transformers, fp32) on the
same micro-batches (pre-tokenized rows, every token a label, in the order air drew them:
`air train --dump-batches`), with the same optimizer (AdamW, weight decay,
global-norm clipping at 1.0), batch and sequence length, and the same number of threads:
  air      `air train` (the native engine's fast CPU path); tokens/s from its metrics.jsonl
           between the warm-up and the last step (model loading and saving excluded)
  pytorch  transformers' LlamaForCausalLM (its default attention), torch.optim.AdamW and
           clip_grad_norm_, timed over the same steps after the same warm-up
It prints both throughputs, the air/pytorch ratio (> 1: air is faster), and the first and last
losses of each side (the first agrees: same weights, same batch; later ones drift apart only by
rounding, as the summation orders differ).

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/train_step/bench.py \
      [--layers 4 --hidden 256 --seq 256 --batch 4 --steps 12 --warmup 2 --threads 2]
AIR_CPU_KERNELS=avx2 (or generic) measures air's kernels for CPUs without AVX-512.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


def build_model(args, model_dir):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    heads = max(1, args.hidden // 64)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                         intermediate_size=args.hidden * 8 // 3 // 64 * 64 or 64,
                         num_hidden_layers=args.layers, num_attention_heads=heads,
                         num_key_value_heads=max(1, heads // 2),
                         max_position_embeddings=max(512, args.seq), tie_word_embeddings=False,
                         bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config).float()
    model.save_pretrained(model_dir, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def write_rows(args, path):
    import random
    rng = random.Random(0)
    rows = args.batch * (args.steps + args.warmup)
    with open(path, "w") as f:
        for _ in range(rows):
            ids = [rng.randrange(3, args.vocab) for _ in range(args.seq)]
            f.write(json.dumps({"input_ids": ids}) + "\n")
    return rows


def run_air(args, air, model_dir, data, work):
    out = work / "air_out"
    cfg = work / "train.yaml"
    cfg.write_text(
        f"model_name: {model_dir}\ndataset_name: {data}\noutput_dir: {out}\n"
        f"max_seq_len: {args.seq}\nper_device_batch_size: {args.batch}\n"
        f"gradient_accumulation_steps: 1\nlearning_rate: {args.lr}\n"
        f"max_steps: {args.steps + args.warmup}\nlr_scheduler_type: constant\n"
        "weight_decay: 0.01\nmax_grad_norm: 1.0\nlogging_steps: 1\nsave_steps: 0\n"
        "seed: 0\nbf16: false\nactivation_checkpointing: false\n")
    proc = subprocess.run([air, "train", "--config", str(cfg), "--threads", str(args.threads),
                           "--dump-batches", str(work / "batches.jsonl")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"air train failed:\n{proc.stdout}\n{proc.stderr}")
    compute = next((l for l in proc.stdout.splitlines() if l.startswith("compute")), "")
    print(f"air {compute}")
    metrics = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "loss" in m and "step" in m]
    first, last = steps[args.warmup - 1], steps[-1]
    tokens = last["tokens"] - first["tokens"]
    seconds = last["elapsed_s"] - first["elapsed_s"]
    return tokens / seconds, steps[0]["loss"], last["loss"]


def run_pytorch(args, model_dir, batches_file):
    import torch
    from transformers import LlamaForCausalLM
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    batches = [json.loads(l) for l in open(batches_file)]  # air's own, in its order
    losses, start, tokens = [], None, 0
    for step in range(args.steps + args.warmup):
        if step == args.warmup:
            start, tokens = time.perf_counter(), 0
        ids = torch.tensor(batches[step]["input_ids"])
        loss = model(input_ids=ids, labels=torch.tensor(batches[step]["labels"])).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        tokens += ids.numel()
    return tokens / (time.perf_counter() - start), losses[0], losses[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--lr", type=float, default=1e-4)
    args = parser.parse_args()
    if args.warmup < 1 or args.steps < 1:
        parser.error("--warmup and --steps must be >= 1 (timing starts after the warm-up steps)")
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    with tempfile.TemporaryDirectory(prefix="air_bench_train_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data = work / "model", work / "rows.jsonl"
        params = build_model(args, model_dir)
        write_rows(args, data)
        print(f"model: Llama {args.layers} layers, hidden {args.hidden}, vocab {args.vocab}, "
              f"{params / 1e6:.2f} M parameters, fp32; batch {args.batch} x {args.seq} tokens; "
              f"{args.steps} timed steps after {args.warmup}; {args.threads} threads")
        air_tps, air_first, air_last = run_air(args, air, model_dir, data, work)
        torch_tps, torch_first, torch_last = run_pytorch(args, model_dir, work / "batches.jsonl")
    print(f"{'':8} {'tokens/s':>10} {'first loss':>11} {'last loss':>10}")
    print(f"{'air':8} {air_tps:10.0f} {air_first:11.4f} {air_last:10.4f}")
    print(f"{'pytorch':8} {torch_tps:10.0f} {torch_first:11.4f} {torch_last:10.4f}")
    print(f"ratio air/pytorch: {air_tps / torch_tps:.2f}x")


if __name__ == "__main__":
    main()
