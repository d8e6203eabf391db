#!/usr/bin/env python3
"""FSDP throughput: `air train` FULL_SHARD on 2 ranks vs PyTorch FSDP2 (`fully_shard`) on 2 ranks.

Both sides train the same random-initialized Llama (bench/train_step's, saved once by
transformers in fp32) on 2 CPU ranks of 1 thread each, on the same per-rank micro-batches with
the same optimizer:
  air      `air launch --standalone --nproc-per-node 2 --no-python air train --threads 1` with
           fsdp_sharding_strategy FULL_SHARD (Gloo, a communication thread with prefetch and
           overlapped reduce-scatter); it writes each rank's micro-batches (--dump-batches)
  pytorch  torchrun --standalone --nproc-per-node 2 bench/fsdp/torch_fsdp2_worker.py:
           transformers' LlamaForCausalLM with fully_shard per decoder layer and on the root,
           gloo, torch.set_num_threads(1), replaying air's files rank by rank; AdamW (weight
           decay 0.01 on 2+-dim tensors), global-norm clipping at 1.0, the loss over the
           global count of loss tokens (air's normalization)
Tokens/s (over both ranks) are timed between the warm-up and the last step on each side (model
loading, sharding and the checkpoint excluded). It prints both, the air/pytorch ratio (> 1: air
is faster), the losses of every step and their maximum relative difference (same weights, same
batches, same normalization: rounding only, ~1e-6), and the CPU model with the load.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/fsdp/vs_torch_fsdp2.py \
      [--layers 4 --hidden 256 --vocab 4096 --seq 256 --batch 2 --steps 10 --warmup 2
       --repeats 2] [--bf16]
--bf16 runs both sides in bf16 mixed precision (air `bf16: true`, FSDP2
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)); the losses then agree to bf16's
precision, not fp32's.
Each side runs --repeats times, interleaved (the machine is shared); the tokens/s are medians,
the losses those of the first run of each (every run is deterministic).
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import common


def run_torch(args, work, model_dir, prefix):
    out = work / "torch.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "--master-port", str(common.free_port()),
           str(pathlib.Path(__file__).with_name("torch_fsdp2_worker.py")), "--model",
           str(model_dir), "--batches", str(prefix), "--out", str(out), "--warmup",
           str(args.warmup), "--threads", "1", "--lr", str(args.lr)] + (
               ["--bf16"] if args.bf16 else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"torchrun (FSDP2) failed ({proc.returncode}):\n{proc.stdout}\n"
                 f"{proc.stderr[-6000:]}")
    return json.loads(out.read_text())


def main():
    parser = common.model_parser(__doc__, layers=4, hidden=256, vocab=4096, seq=256)
    parser.add_argument("--batch", type=int, default=2, help="rows per rank per step")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--repeats", type=int, default=2, help="interleaved runs of each side")
    parser.add_argument("--bf16", action="store_true",
                        help="both sides in bf16 mixed precision: air bf16: true, FSDP2 "
                             "MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)")
    args = common.parse_timed(parser)
    total = args.steps + args.warmup
    print(common.machine_line())
    with tempfile.TemporaryDirectory(prefix="air_bench_fsdp_torch_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data, _, model = common.prepare(work, args, 2 * args.batch * total)
        print(f"{model}; 2 ranks x 1 thread, {args.batch} x "
              f"{args.seq} tokens per rank per step; {args.steps} timed steps after "
              f"{args.warmup}")
        prefix = work / "batches.jsonl"
        airs, torches = [], []
        for i in range(args.repeats):  # interleaved: a load change hits both sides
            cfg = work / f"air_{i}.yaml"
            common.train_config(cfg, model_name=model_dir, dataset_name=data,
                                output_dir=work / f"air_out_{i}", max_seq_len=args.seq,
                                per_device_batch_size=args.batch, max_steps=total,
                                learning_rate=args.lr, fsdp_sharding_strategy="FULL_SHARD",
                                bf16=args.bf16)
            airs.append(common.run_air(work, f"air_{i}", cfg, 2, 1,
                                       dump=prefix if i == 0 else None))
            torches.append(run_torch(args, work, model_dir, prefix))
    air_all = [a.tokens_per_s(args.warmup) for a in airs]
    torch_all = [t["tokens_per_s"] for t in torches]
    air_tps, torch_tps = common.median(air_all), common.median(torch_all)
    air, torch_side = airs[0], torches[0]
    air_losses, torch_losses = [m["loss"] for m in air.steps()], torch_side["losses"]
    if len(air_losses) != len(torch_losses):
        sys.exit(f"air ran {len(air_losses)} steps, pytorch {len(torch_losses)}")
    print(f"{'step':>4} {'air loss':>12} {'pytorch loss':>13} {'rel diff':>9}")
    diffs = []
    for i, (a, t) in enumerate(zip(air_losses, torch_losses)):
        diffs.append(abs(a - t) / abs(t))
        print(f"{i + 1:4} {a:12.7f} {t:13.7f} {diffs[-1]:9.1e}")
    par = air.parallel
    print(f"air: {par['comm_s'] / total * 1e3:.1f} ms/step in collectives, "
          f"{par['comm_wait_s'] / total * 1e3:.1f} ms/step waited for")
    print(f"median of {args.repeats} interleaved runs of each side")
    print(f"{'':18} {'tokens/s':>9} {'range':>11}")
    print(f"{'air FULL_SHARD':18} {air_tps:9.0f} "
          f"{f'[{min(air_all):.0f}-{max(air_all):.0f}]':>11}")
    print(f"{'pytorch FSDP2':18} {torch_tps:9.0f} "
          f"{f'[{min(torch_all):.0f}-{max(torch_all):.0f}]':>11}")
    print(f"ratio air/pytorch: {air_tps / torch_tps:.2f}x; max relative loss difference "
          f"{max(diffs):.1e} over {len(diffs)} steps")
    print(common.machine_line())


if __name__ == "__main__":
    main()
