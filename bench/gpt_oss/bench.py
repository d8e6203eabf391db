#!/usr/bin/env python3
"""GPT-OSS training throughput: `air train` vs PyTorch + transformers' GptOssForCausalLM on the
same tiny-but-not-trivial mixture-of-experts shape, data and CPU: one run, or the medians of
--rounds interleaved rounds.

transformers builds and saves a random GptOssForCausalLM (fp32; by default 4 layers, hidden
256, 8 experts top-2 of width 256, 4 query / 2 key-value heads of 64, sliding window 128 on
every other layer, sinks, YaRN, vocab 4096). Both sides train it on the same pre-tokenized
rows in the order air drew them (`air train --dump-batches`), with AdamW, weight decay on 2-D
tensors and clipping at 1.0, and the same threads: air's tokens/s from its metrics between the
warm-up and the last step; PyTorch's timed over the same steps, with transformers' default
attention and each experts implementation asked for (grouped_mm, its default, and eager, its
loop of one GEMM per routed expert, as air computes); the ratio is against the best. The runners are bench/train_step's; this
file only builds the model. Prints tokens/s, the first/last loss, the ratio air / PyTorch's best and
the CPU's model and flags.

The LoRA side (--sides full,lora, the default; lora alone with --sides lora) trains the same
model with the second seed's LoraConfig (r 16, alpha 16, dropout 0.05, all-linear: q/k/v/o_proj
of every layer on GPT-OSS): `air train` with use_peft against peft.get_peft_model over
transformers' GptOssForCausalLM, each experts implementation asked for, on air's batches, each in
its own process (bench/lora's runners: tokens/s, the training state; peak RSS is bench/lora's
to compare); the ratio is against PEFT's best.

With --rounds N every side runs N times, each round running all of them back to back, the
dtypes in turn first (fp32 then bf16, then bf16 then fp32, ...: a guest's speed drifts, and a
fixed order showed it as bf16 running 6% slower than fp32 where interleaved runs measured the
two equal); tokens/s are each side's median, each round's own figures printed after.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/gpt_oss/bench.py \
      [--layers 4 --hidden 256 --experts 8 --top-k 2 --vocab 4096 --seq 256 --batch 2
       --steps 6 --warmup 2 --threads 2] [--dtype fp32|bf16|both] [--sides full,lora]
       [--r 16 --alpha 16 --dropout 0.05] [--hf-experts grouped_mm,eager|none] [--rounds 1]
"""
import argparse
import importlib.util
import os
import pathlib
import statistics
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "train_step"))
import cpu_info  # noqa: E402  (bench/cpu_info.py: the machine line)
import bench as train_step  # noqa: E402  (bench/train_step/bench.py: the runners)

# bench/lora/bench.py's runners (air use_peft; PEFT + transformers in its own process).
_spec = importlib.util.spec_from_file_location("lora_bench", REPO / "bench" / "lora" / "bench.py")
lora_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lora_bench)
MIB = 1024.0 * 1024.0


def build_model(args, model_dir):
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM
    torch.manual_seed(0)
    config = GptOssConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden,
        num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, num_local_experts=args.experts, num_experts_per_tok=args.top_k,
        sliding_window=128, max_position_embeddings=max(512, args.seq),
        layer_types=["sliding_attention", "full_attention"] * (args.layers // 2)
        + ["sliding_attention"] * (args.layers % 2),
        rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 8.0,
                         "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                         "original_max_position_embeddings": 64},
        tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = GptOssForCausalLM(config).float()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.normal_()
            layer.mlp.router.weight.normal_(0.0, 0.3)  # routing that spreads the tokens
    model.save_pretrained(model_dir)
    return sum(p.numel() for p in model.parameters())


def hf_experts(args):
    """transformers' experts implementations to time; none: air alone (two air builds compared)."""
    return [] if args.hf_experts == "none" else args.hf_experts.split(",")


def run_lora(args, air, model_dir, data, work, dtypes):
    """The LoRA side: air use_peft and PEFT (each experts implementation) per dtype."""
    out = {}
    for bf16 in dtypes:
        sub = work / f"lora_{'bf16' if bf16 else 'fp32'}"
        sub.mkdir(parents=True)
        args.bf16 = bf16
        out[("air", bf16)] = lora_bench.run_air(args, air, model_dir, data, sub)
        for experts in hf_experts(args):
            out[(f"peft {experts}", bf16)] = lora_bench.run_peft(
                args, model_dir, sub / "batches.jsonl", experts)
    return out


def print_lora(args, lora, dtypes):
    # Peak RSS is not compared here: this process holds PyTorch's full fine-tuning run, and a
    # child's ru_maxrss starts from its parent's at fork (bench/lora compares it, run alone).
    head = f"LoRA r {args.r} alpha {args.alpha:g} dropout {args.dropout:g}"
    print(f"{head:32} {'tokens/s':>9} {'first loss':>11} {'last loss':>10} {'state (MiB)':>12}")
    for (side, bf16), r in lora.items():
        print(f"{side + (' bf16' if bf16 else ' fp32'):32} {r['tokens_per_s']:9.0f} "
              f"{r['first_loss']:11.4f} {r['last_loss']:10.4f} "
              f"{sum(r['state'].values()) / MIB:12.1f}")
    for bf16 in dtypes if hf_experts(args) else []:
        name = "bf16" if bf16 else "fp32"
        best = max((r["tokens_per_s"], side) for (side, b), r in lora.items()
                   if b == bf16 and side != "air")
        print(f"ratio air LoRA {name} / PEFT + transformers {name}'s best ({best[1]}): tokens/s "
              f"{lora[('air', bf16)]['tokens_per_s'] / best[0]:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--dtype", choices=["both", "fp32", "bf16"], default="fp32")
    parser.add_argument("--hf-experts", default="grouped_mm,eager",
                        help="transformers' experts implementations to time (its default is "
                             "grouped_mm; eager is its loop of one GEMM per routed expert; none: "
                             "time air alone)")
    parser.add_argument("--sides", default="full,lora",
                        help="full (every parameter trained), lora (the seed's LoraConfig), or both")
    parser.add_argument("--r", type=int, default=16)
    parser.add_argument("--alpha", type=float, default=16)
    parser.add_argument("--dropout", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every side this many times, interleaved; report medians")
    args = parser.parse_args()
    sides = set(args.sides.split(","))
    if not sides or not sides <= {"full", "lora"}:
        parser.error("--sides takes full, lora or full,lora")
    if args.warmup < 1 or args.steps < 1:
        parser.error("--warmup and --steps must be >= 1 (timing starts after the warm-up steps)")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    dtypes = {"both": [False, True], "fp32": [False], "bf16": [True]}[args.dtype]
    print(cpu_info.describe())
    full_rounds, lora_rounds = [], []
    with tempfile.TemporaryDirectory(prefix="air_bench_gpt_oss_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data = work / "model", work / "rows.jsonl"
        params = build_model(args, model_dir)
        train_step.write_rows(args, data)
        print(f"model: GPT-OSS {args.layers} layers, hidden {args.hidden}, {args.experts} "
              f"experts top-{args.top_k}, vocab {args.vocab}, {params / 1e6:.2f} M parameters; "
              f"batch {args.batch} x {args.seq} tokens; {args.steps} timed steps after "
              f"{args.warmup}; {args.threads} threads; {args.rounds} round(s)")
        for round_index in range(args.rounds):
            order = dtypes if round_index % 2 == 0 else dtypes[::-1]
            one = {}
            if "full" in sides:
                for bf16 in order:
                    one[("air", bf16)] = train_step.run_air(args, air, model_dir, data, work,
                                                            bf16)
                for experts in hf_experts(args):
                    args.hf_load_kwargs = {"experts_implementation": experts}
                    for bf16 in order:
                        one[(f"pytorch {experts}", bf16)] = train_step.run_pytorch(
                            args, model_dir, work / "batches.jsonl", bf16)
            full_rounds.append(one)
            if "lora" in sides:
                lora_rounds.append(
                    run_lora(args, air, model_dir, data, work / f"round_{round_index}", order))
    # Each side's median tokens/s; the losses and state are the first round's (every round
    # trains the same steps).
    keys = [(side, bf16) for side, _ in full_rounds[0] for bf16 in dtypes]
    results = {key: (statistics.median(r[key][0] for r in full_rounds),) + full_rounds[0][key][1:]
               for key in dict.fromkeys(keys)}
    lora = {}
    if lora_rounds:
        for key in dict.fromkeys((side, bf16) for side, _ in lora_rounds[0] for bf16 in dtypes):
            lora[key] = dict(lora_rounds[0][key], tokens_per_s=statistics.median(
                r[key]["tokens_per_s"] for r in lora_rounds))
    if results:
        print(f"full fine-tuning {'':7} {'tokens/s':>10} {'first loss':>11} {'last loss':>10}")
        for (side, bf16), (tps, first, last) in results.items():
            print(f"{side + (' bf16' if bf16 else ' fp32'):24} {tps:10.0f} {first:11.4f} "
                  f"{last:10.4f}")
        for bf16 in dtypes if hf_experts(args) else []:
            name = "bf16" if bf16 else "fp32"
            best = max((tps, side) for (side, b), (tps, _, _) in results.items()
                       if b == bf16 and side != "air")
            print(f"ratio air {name} / PyTorch {name}'s best ({best[1]}): "
                  f"{results[('air', bf16)][0] / best[0]:.2f}x")
    if lora:
        print_lora(args, lora, dtypes)
    if len(dtypes) == 2:  # "bf16 never slower than fp32 on the same CPU"
        for kind, table, value in (("full fine-tuning", results, lambda r: r[0]),
                                   ("LoRA", lora, lambda r: r["tokens_per_s"])):
            if ("air", True) in table:
                print(f"ratio air bf16 / air fp32, {kind}: "
                      f"{value(table[('air', True)]) / value(table[('air', False)]):.2f}x")
    if args.rounds > 1:
        print("per round, tokens/s (the dtypes' order alternates):")
        for kind, rounds, value in (("full", full_rounds, lambda r: r[0]),
                                    ("LoRA", lora_rounds, lambda r: r["tokens_per_s"])):
            for side, bf16 in dict.fromkeys(k for r in rounds[:1] for k in r):
                print(f"  {kind} {side} {'bf16' if bf16 else 'fp32'}: "
                      + " ".join(f"{value(r[(side, bf16)]):.0f}" for r in rounds))
    print(cpu_info.describe())


if __name__ == "__main__":
    main()
