#!/usr/bin/env python3
"""GPT-OSS training throughput: `air train` vs PyTorch + transformers' GptOssForCausalLM on the
same tiny-but-not-trivial mixture-of-experts shape, data and CPU, one run.

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

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/gpt_oss/bench.py \
      [--layers 4 --hidden 256 --experts 8 --top-k 2 --vocab 4096 --seq 256 --batch 2
       --steps 6 --warmup 2 --threads 2] [--dtype fp32|bf16|both]
"""
import argparse
import os
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "train_step"))
import cpu_info  # noqa: E402  (bench/cpu_info.py: the machine line)
import bench as train_step  # noqa: E402  (bench/train_step/bench.py: the runners)


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
                             "grouped_mm; eager is its loop of one GEMM per routed expert)")
    args = parser.parse_args()
    if args.warmup < 1 or args.steps < 1:
        parser.error("--warmup and --steps must be >= 1 (timing starts after the warm-up steps)")
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    dtypes = {"both": [False, True], "fp32": [False], "bf16": [True]}[args.dtype]
    print(cpu_info.describe())
    results = {}
    with tempfile.TemporaryDirectory(prefix="air_bench_gpt_oss_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data = work / "model", work / "rows.jsonl"
        params = build_model(args, model_dir)
        train_step.write_rows(args, data)
        print(f"model: GPT-OSS {args.layers} layers, hidden {args.hidden}, {args.experts} "
              f"experts top-{args.top_k}, vocab {args.vocab}, {params / 1e6:.2f} M parameters; "
              f"batch {args.batch} x {args.seq} tokens; {args.steps} timed steps after "
              f"{args.warmup}; {args.threads} threads")
        for bf16 in dtypes:
            results[("air", bf16)] = train_step.run_air(args, air, model_dir, data, work, bf16)
        for experts in args.hf_experts.split(","):
            args.hf_load_kwargs = {"experts_implementation": experts}
            for bf16 in dtypes:
                results[(f"pytorch {experts}", bf16)] = train_step.run_pytorch(
                    args, model_dir, work / "batches.jsonl", bf16)
    print(f"{'':24} {'tokens/s':>10} {'first loss':>11} {'last loss':>10}")
    for (side, bf16), (tps, first, last) in results.items():
        print(f"{side + (' bf16' if bf16 else ' fp32'):24} {tps:10.0f} {first:11.4f} {last:10.4f}")
    for bf16 in dtypes:
        name = "bf16" if bf16 else "fp32"
        best = max((tps, side) for (side, b), (tps, _, _) in results.items()
                   if b == bf16 and side != "air")
        print(f"ratio air {name} / PyTorch {name}'s best ({best[1]}): "
              f"{results[('air', bf16)][0] / best[0]:.2f}x")
    print(cpu_info.describe())


if __name__ == "__main__":
    main()
