#!/usr/bin/env python3
"""Does sampling system metrics slow a training run? The quickstart workload
(examples/quickstart/train.yaml: the tiny Llama, `air train` on 2 local CPU nodes, FSDP over
Gloo) under `air run`, shortened to --steps optimizer steps, with system_metrics_interval_s at 1
(the sampler at its busiest) and at 0 (off), in interleaved rounds (on, off, on, off, ...) so
that drift in the machine's load falls on both alike. Each run's training throughput is the
mean of `air train`'s logged tokens_per_s (rank 0's metrics.jsonl) past the first logging
interval (start-up); prints every round, the medians, and the on/off ratio, with the CPU line.

    AIR_BIN=build/bin/air python bench/system_metrics/bench.py [--rounds 5] [--steps 60]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import cpu_info  # noqa: E402


def one_run(air, home, out, interval, steps):
    """tokens/s of one quickstart run with system_metrics_interval_s=interval, and its run id."""
    env = dict(os.environ, AIR_HOME=str(home))
    overrides = [f"system_metrics_interval_s={interval}", f"parameters.max_steps={steps}",
                 "parameters.logging_steps=5", f"parameters.output_dir={out}"]
    cmd = [air, "run", "-f", str(REPO / "examples/quickstart/train.yaml")]
    for o in overrides:
        cmd += ["--override", o]
    # It prints each override, then the run id.
    run_id = subprocess.run(cmd, env=env, check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]
    deadline = time.monotonic() + 1800
    while True:
        got = json.loads(subprocess.run([air, "-o", "json", "get", run_id], env=env, check=True,
                                        capture_output=True, text=True).stdout)["data"]
        if got["state"] not in ("PENDING", "RUNNING", "TERMINATING"):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not end")
        time.sleep(1)
    if got["state"] != "SUCCEEDED":
        logs = subprocess.run([air, "logs", run_id], env=env, capture_output=True, text=True)
        raise RuntimeError(f"run {run_id} {got['state']}: {got['failure_summary']}\n{logs.stdout}")
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [m["tokens_per_s"] for m in logged[1:]]  # past the first interval (start-up)
    samples = got["system_metrics"]
    return statistics.mean(rates), run_id, samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--air", default=os.environ.get("AIR_BIN", str(REPO / "build/bin/air")))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    print(cpu_info.describe(), flush=True)
    results = {1: [], 0: []}
    with tempfile.TemporaryDirectory(prefix="air-sysmetrics-bench-") as tmp:
        home = pathlib.Path(tmp) / "home"
        steal_before = cpu_info.cpu_times()
        for r in range(args.rounds):
            for interval in (1, 0) if r % 2 == 0 else (0, 1):
                out = pathlib.Path(tmp) / f"out-{r}-{interval}"
                rate, run_id, samples = one_run(args.air, home, out, interval, args.steps)
                results[interval].append(rate)
                sampled = "no samples" if samples is None else \
                    f"{len(samples['nodes'])} node(s) sampled"
                print(f"round {r}: system_metrics_interval_s={interval}: {rate:8.1f} tokens/s "
                      f"(run {run_id}, {sampled})", flush=True)
        steal = cpu_info.steal_percent(steal_before, cpu_info.cpu_times())
    on, off = statistics.median(results[1]), statistics.median(results[0])
    spread = lambda xs: (max(xs) - min(xs)) / statistics.median(xs) * 100  # noqa: E731
    print(f"median tokens/s: interval 1 s {on:.1f} (spread {spread(results[1]):.1f}%), "
          f"off {off:.1f} (spread {spread(results[0]):.1f}%)")
    print(f"ratio on/off: {on / off:.3f}   ({args.rounds} rounds of {args.steps} steps; "
          f"steal {steal:.1f}%)")
    print(cpu_info.describe())


if __name__ == "__main__":
    main()
