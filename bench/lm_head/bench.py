#!/usr/bin/env python3
"""Peak memory of a training step with the fused, chunked linear + cross-entropy head
(src/engine/model/lm_head.h, Liger-Kernel's FusedLinearCrossEntropy scheme) against the unfused
head that materializes the N x V logits, on a vocabulary of 128k (Llama 3's 128,256) and 8 rows
of 1,024 tokens (8,192 tokens: 4.2 GB of fp32 logits unfused).

Both sides are `air train` on the same random-init Llama (saved by transformers) and the same
rows, `fused_linear_cross_entropy: true` vs `false`, one process each; the peak resident set of
each process (ru_maxrss, which includes loading the weights) and its step time are printed, with
the ratio, the CPU model and its flags.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/lm_head/bench.py \
      [--vocab 128256 --hidden 256 --layers 2 --rows 8 --seq 1024 --steps 2 --threads 2]
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
sys.path.insert(0, str(REPO / "bench"))
import cpu_info  # noqa: E402  (bench/cpu_info.py: the machine line)



def build_model(args, model_dir):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                         intermediate_size=args.hidden * 8 // 3 // 64 * 64 or 64,
                         num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
                         num_key_value_heads=max(1, args.hidden // 128),
                         max_position_embeddings=max(2048, args.seq), tie_word_embeddings=False,
                         bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(model_dir, safe_serialization=True)


def write_rows(args, path):
    import random
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(args.rows * args.steps):
            ids = [rng.randrange(3, args.vocab) for _ in range(args.seq)]
            f.write(json.dumps({"input_ids": ids}) + "\n")


def run(args, air, model_dir, data, work, fused):
    out = work / f"out_{fused}"
    cfg = work / f"train_{fused}.yaml"
    cfg.write_text(
        f"model_name: {model_dir}\ndataset_name: {data}\noutput_dir: {out}\n"
        f"max_seq_len: {args.seq}\nper_device_batch_size: {args.rows}\nlearning_rate: 1e-4\n"
        f"max_steps: {args.steps}\nlr_scheduler_type: constant\nlogging_steps: 1\n"
        f"save_steps: 0\nseed: 0\nfused_linear_cross_entropy: {str(fused).lower()}\n")
    start = time.perf_counter()
    proc = subprocess.Popen([air, "train", "--config", str(cfg), "--threads", str(args.threads)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        sys.exit(f"air train failed:\n{output}")
    metrics = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    step_s = metrics[-1]["elapsed_s"] - metrics[0]["elapsed_s"] if len(metrics) > 1 else elapsed
    return usage.ru_maxrss * 1024, step_s / max(1, len(metrics) - 1), metrics[-1]["loss"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    print(cpu_info.describe())
    with tempfile.TemporaryDirectory(prefix="air_bench_head_") as tmp:
        work = pathlib.Path(tmp)
        build_model(args, work / "model")
        write_rows(args, work / "rows.jsonl")
        tokens = args.rows * args.seq
        print(f"Llama {args.layers} layers, hidden {args.hidden}, vocab {args.vocab}; "
              f"{args.rows} x {args.seq} = {tokens} tokens a step; logits would be "
              f"{tokens * args.vocab * 4 / 2**30:.2f} GiB in fp32; {args.threads} threads")
        results = {f: run(args, air, work / "model", work / "rows.jsonl", work, f)
                   for f in (True, False)}
    print(f"{'head':10} {'peak RSS':>10} {'s/step':>8} {'last loss':>10}")
    for fused, (rss, step, loss) in results.items():
        print(f"{'fused' if fused else 'unfused':10} {rss / 2**30:8.2f} GiB {step:8.2f} {loss:10.4f}")
    (f_rss, f_step, f_loss), (u_rss, u_step, u_loss) = results[True], results[False]
    print(f"unfused/fused peak RSS: {u_rss / f_rss:.2f}x ({(u_rss - f_rss) / 2**30:.2f} GiB saved);"
          f" step time fused/unfused: {f_step / u_step:.2f}x; losses agree to "
          f"{abs(f_loss - u_loss) / abs(u_loss):.1e}")


if __name__ == "__main__":
    main()
