#!/usr/bin/env python3
"""FSDP memory: the training state each rank holds on 1, 2 and 4 ranks, against 1/N.

One random-initialized Llama of >= 100M parameters (by default hidden 768, 12 layers, vocab
32000, intermediate 2048: 127M; bench/train_step's builder, saved by transformers in fp32) is
trained for a couple of steps on tiny rows (the state does not depend on the sequence):
  N = 1    one plain `air train --threads 1` process (no launcher, no FSDP): its state is
           parameters + gradients + AdamW m and v = 4 x params x 4 bytes
  N = 2, 4 `air launch --standalone --nproc-per-node N --no-python air train --threads 1` per
           strategy (FULL_SHARD by default; --strategies adds SHARD_GRAD_OP, NO_SHARD);
           rank 0's -o json data.parallel gives the bytes it holds: parameter_bytes,
           gradient_bytes, optimizer_bytes (the state), and gather_bytes (the gather/reduce
           slots FULL_SHARD and SHARD_GRAD_OP use for whole units in flight) apart
It prints the state per rank, its ratio to the N = 1 state next to 1/N, the gather slots, and
each rank's peak RSS (/usr/bin/time -v, maximum resident set size). The peak RSS is not the
state: it adds the gather slots, the process, the libraries and the activations, and rank 0
gathers the consolidated checkpoint at the end (one whole fp32 copy). A sharded rank loads the
model one unit at a time, so it never holds the whole model while loading.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/fsdp/memory.py \
      [--layers 12 --hidden 768 --vocab 32000 --seq 32 --steps 2 --ranks 1,2,4
       --strategies FULL_SHARD]
"""
import pathlib
import tempfile

import common


def main():
    parser = common.model_parser(__doc__, layers=12, hidden=768, vocab=32000, seq=32,
                                 timed=False)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--ranks", default="1,2,4", help="N values; 1 is one plain process")
    parser.add_argument("--strategies", default="FULL_SHARD",
                        help="for N > 1: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD (comma-separated)")
    args = parser.parse_args()
    ranks = [int(n) for n in args.ranks.split(",")]
    print(common.machine_line())
    rows = []  # (N, strategy, state bytes, gather bytes, [peak RSS per rank])
    with tempfile.TemporaryDirectory(prefix="air_bench_fsdp_memory_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data, params, model = common.prepare(work, args, max(ranks) * args.steps)
        print(f"{model} ({common.mib(4 * params):.0f} MiB); "
              f"1 row x {args.seq} tokens per rank per step, {args.steps} steps, 1 thread "
              f"per rank")
        single_state = 4 * params * 4
        for n in ranks:
            for strategy in ([None] if n == 1 else args.strategies.split(",")):
                name = f"n{n}_{(strategy or 'single').lower()}"
                cfg = work / f"{name}.yaml"
                keys = dict(model_name=model_dir, dataset_name=data, output_dir=work / name,
                            max_seq_len=args.seq, per_device_batch_size=1,
                            max_steps=args.steps)
                if strategy:
                    keys["fsdp_sharding_strategy"] = strategy
                common.train_config(cfg, **keys)
                run = common.run_air(work, name, cfg, 0 if n == 1 else n, 1)
                if n == 1:
                    rows.append((1, "one process", single_state, 0, run.peak_rss))
                    continue
                par = run.parallel
                state = par["parameter_bytes"] + par["gradient_bytes"] + par["optimizer_bytes"]
                rows.append((n, strategy, state, par["gather_bytes"], run.peak_rss))
                print(f"  N={n} {strategy}: parameters {common.mib(par['parameter_bytes']):.1f} "
                      f"MiB, gradients {common.mib(par['gradient_bytes']):.1f} MiB, optimizer "
                      f"{common.mib(par['optimizer_bytes']):.1f} MiB, gather slots "
                      f"{common.mib(par['gather_bytes']):.1f} MiB")
    print(f"{'N':>2} {'strategy':13} {'state/rank':>11} {'ratio':>6} {'1/N':>6} "
          f"{'gather':>10} {'state+gather':>12}  peak RSS per rank")
    for n, strategy, state, gather, rss in rows:
        peaks = ", ".join(f"{common.mib(r):.0f}" if r else "?" for r in rss)
        print(f"{n:2} {strategy:13} {common.mib(state):7.1f} MiB {state / single_state:6.3f} "
              f"{1 / n:6.3f} {common.mib(gather):6.1f} MiB {common.mib(state + gather):8.1f} MiB"
              f"  {peaks} MiB")
    print("state = parameters + gradients + AdamW m, v held by the rank (N = 1: 16 bytes per "
          "parameter); gather = transient whole-unit slots; peak RSS adds the slots, the "
          "process and activations (rank 0: the consolidated checkpoint too)")
    print(common.machine_line())


if __name__ == "__main__":
    main()
