#!/usr/bin/env python3
"""FSDP scaling on one host: `air train` as 1 process x 2 threads vs 2 processes x 1 thread.

The same model (bench/train_step's random-initialized Llama), the same rows and the same global
batch on each side: the one process takes `--global-batch` rows per step, each of the 2 ranks
half of them (per_device_batch_size = global / 2; DistributedSampler semantics, so both sides
train on the same global batches). The 2-rank side runs under
`air launch --standalone --nproc-per-node 2 --no-python air train --threads 1` once per
strategy (FULL_SHARD and NO_SHARD by default). It prints, per configuration:
  tokens/s    median over the repeats, between the warm-up and the last step (rank 0's
              metrics.jsonl; over all ranks)
  ratio       tokens/s over the 1 x 2 threads figure (> 1: the 2 ranks are faster)
  comm/step   seconds per step inside collectives (data.parallel.comm_s over the steps run;
              they run on each rank's communication thread)
  wait/step   seconds per step the compute thread was blocked on them (comm_wait_s)
  hidden      1 - wait / comm: the share of communication that overlap hid behind compute
  loss diff   max relative loss difference from the 1-process run over all steps (same global
              batches, so it should be rounding only)
and the CPU model with the load (the machine is shared: read the figures with it).

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/fsdp/scaling.py \
      [--layers 4 --hidden 256 --vocab 4096 --seq 256 --global-batch 4 --steps 10 --warmup 2
       --strategies FULL_SHARD,NO_SHARD --repeats 3]
Each configuration runs --repeats times, interleaved (so a change in the shared machine's load
hits all of them); the table gives the median, the tokens/s range, and the medians of comm and
wait.
"""
import pathlib
import tempfile

import common


def main():
    parser = common.model_parser(__doc__, layers=4, hidden=256, vocab=4096, seq=256)
    parser.add_argument("--global-batch", type=int, default=4, help="rows per step, all ranks")
    parser.add_argument("--strategies", default="FULL_SHARD,NO_SHARD")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each side")
    args = common.parse_timed(parser)
    if args.global_batch % 2:
        parser.error("--global-batch must be even (2 ranks take half each)")
    total = args.steps + args.warmup
    print(common.machine_line())
    with tempfile.TemporaryDirectory(prefix="air_bench_fsdp_scaling_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data, _, model = common.prepare(work, args, args.global_batch * total)
        print(f"{model}; global batch {args.global_batch} x "
              f"{args.seq} tokens; {args.steps} timed steps after {args.warmup}")

        def config(name, batch, strategy=None):
            path = work / f"{name}.yaml"
            keys = dict(model_name=model_dir, dataset_name=data, output_dir=work / name,
                        max_seq_len=args.seq, per_device_batch_size=batch, max_steps=total)
            if strategy:
                keys["fsdp_sharding_strategy"] = strategy
            common.train_config(path, **keys)
            return path

        configs = [("1 proc x 2 threads", "one", args.global_batch, None, 0, 2)]
        for strategy in args.strategies.split(","):
            configs.append((f"2 procs x 1 thread {strategy}", strategy.lower(),
                            args.global_batch // 2, strategy, 2, 1))
        # Interleaved repeats: a load change on the shared machine hits every configuration.
        runs = {label: [] for label, *_ in configs}
        for i in range(args.repeats):
            for label, name, batch, strategy, nproc, threads in configs:
                name = f"{name}_{i}"
                runs[label].append(common.run_air(work, name, config(name, batch, strategy),
                                                  nproc, threads))
    base_runs = runs[configs[0][0]]
    base_tps = common.median([r.tokens_per_s(args.warmup) for r in base_runs])
    base_losses = [m["loss"] for m in base_runs[0].steps()]
    print(f"median of {args.repeats} interleaved runs (tokens/s range in brackets)")
    print(f"{'configuration':32} {'tokens/s':>9} {'range':>11} {'ratio':>6} {'comm/step':>10} "
          f"{'wait/step':>10} {'hidden':>7} {'loss diff':>10}")
    for label, *_ in configs:
        tps_all = [r.tokens_per_s(args.warmup) for r in runs[label]]
        tps = common.median(tps_all)
        diff = max(abs(a["loss"] - b) / abs(b) for r in runs[label]
                   for a, b in zip(r.steps(), base_losses))
        spread = f"[{min(tps_all):.0f}-{max(tps_all):.0f}]"
        if runs[label][0].parallel:
            comm = common.median([r.parallel["comm_s"] / total for r in runs[label]])
            wait = common.median([r.parallel["comm_wait_s"] / total for r in runs[label]])
            hidden = 1.0 - min(1.0, wait / comm) if comm > 0 else 0.0
            extra = f"{comm * 1e3:8.1f}ms {wait * 1e3:8.1f}ms {hidden * 100:6.0f}%"
        else:
            extra = f"{'-':>10} {'-':>10} {'-':>7}"
        print(f"{label:32} {tps:9.0f} {spread:>11} {tps / base_tps:5.2f}x {extra} {diff:10.1e}")
    print(common.machine_line())


if __name__ == "__main__":
    main()
