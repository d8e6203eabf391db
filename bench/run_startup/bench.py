#!/usr/bin/env python3
"""Startup latency: `air run` vs torchrun, 2 nodes, the same trivial worker.

For each launcher we measure the wall time from starting the launcher until the worker command
runs on every node (each worker writes bash's $EPOCHREALTIME as its first action):
  air       `air run -f spec.yaml` (2 local nodes): CLI -> store -> detached supervisor ->
            one `air agent` per node -> `bash -c COMMAND`
  torchrun  two `torchrun --nnodes=2 --node_rank=i --nproc_per_node=1 --no-python bash
            worker.sh` processes (the same worker, rendezvous on a fresh port)
  bare      two `bash -c COMMAND` started directly: the floor, no launcher at all
and print medians, the air/torchrun ratio, and air's own overhead (air - bare), whose goal is
under 100 ms.

  AIR_BIN=build/bin/air python bench/run_startup/bench.py [--iterations 15]
"""
import argparse
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
WORKER = 'echo $EPOCHREALTIME > "$OUT/$1_${NODE_RANK:-$GROUP_RANK}"'


def wait_for_files(paths, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return [float(p.read_text()) for p in paths]
        except (FileNotFoundError, ValueError):
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers did not start: {paths}")
            time.sleep(0.002)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_air(air, work, iterations):
    home = work / "air_home"
    out = work / "air_out"
    out.mkdir()
    spec = work / "spec.yaml"
    spec.write_text(
        "experiment_name: startup-bench\n"
        "compute:\n  accelerator_type: CPU_1\n  num_accelerators: 2\n"
        f"command: |\n  set -- air\n  {WORKER}\n"
        f"env_variables:\n  OUT: {out}\n"
        "max_retries: 0\n")
    env = dict(os.environ, AIR_HOME=str(home))
    latencies, returns = [], []
    for i in range(iterations + 1):  # the first run creates the store: not counted
        for f in out.iterdir():
            f.unlink()
        t0 = time.time()
        cli = subprocess.Popen([air, "run", "-f", str(spec)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        # Poll the CLI and the workers together, to time both.
        t_return = None
        deadline = time.monotonic() + 60
        while True:
            if t_return is None and cli.poll() is not None:
                t_return = time.time()
            try:
                starts = [float((out / f"air_{n}").read_text()) for n in (0, 1)]
            except (FileNotFoundError, ValueError):
                starts = None
            if starts is not None and t_return is not None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("air run: workers did not start")
            time.sleep(0.002)
        cli_out, cli_err = cli.communicate()
        if cli.returncode != 0:
            raise RuntimeError(f"air run failed: {cli_err}")
        if i > 0:
            latencies.append(max(starts) - t0)
            returns.append(t_return - t0)
        run_id = cli_out.strip()
        # Let the run finish before the next one (not timed).
        for _ in range(2000):
            state = subprocess.run([air, "-o", "json", "get", run_id], env=env,
                                   capture_output=True, text=True).stdout
            if '"SUCCEEDED"' in state:
                break
            time.sleep(0.005)
        else:
            raise RuntimeError(f"run {run_id} did not succeed: {state}")
    return latencies, returns


def measure_torchrun(torchrun, work, iterations):
    out = work / "torch_out"
    out.mkdir()
    worker = work / "worker.sh"
    worker.write_text(WORKER + "\n")
    env = dict(os.environ, OUT=str(out), OMP_NUM_THREADS="1")
    env.pop("NODE_RANK", None)
    latencies = []
    for i in range(iterations + 1):  # the first run warms the page cache: not counted
        for f in out.iterdir():
            f.unlink()
        port = free_port()
        t0 = time.time()
        procs = [subprocess.Popen(
            [torchrun, "--nnodes=2", f"--node_rank={rank}", "--nproc_per_node=1",
             "--master_addr=127.0.0.1", f"--master_port={port}", "--no-python",
             "bash", str(worker), "torch"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for rank in (0, 1)]
        starts = wait_for_files([out / "torch_0", out / "torch_1"])
        for p in procs:
            _, err = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"torchrun failed: {err[-2000:]}")
        if i > 0:
            latencies.append(max(starts) - t0)
    return latencies


def measure_bare(work, iterations):
    out = work / "bare_out"
    out.mkdir()
    latencies = []
    for i in range(iterations + 1):
        for f in out.iterdir():
            f.unlink()
        t0 = time.time()
        procs = [subprocess.Popen(["bash", "-c", WORKER, "bash", "bare"],
                                  env=dict(os.environ, OUT=str(out), NODE_RANK=str(rank)))
                 for rank in (0, 1)]
        starts = wait_for_files([out / "bare_0", out / "bare_1"])
        for p in procs:
            p.wait()
        if i > 0:
            latencies.append(max(starts) - t0)
    return latencies


def describe(name, values):
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    return (f"{name:<44} median {statistics.median(ms):8.1f} ms   min {ms[0]:7.1f}   "
            f"p90 {p90:7.1f}   (n={len(ms)})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=15)
    args = parser.parse_args()
    air = os.environ.get("AIR_BIN", str(REPO / "build" / "bin" / "air"))
    venv = os.environ.get("AIR_VENV")
    torchrun = shutil.which("torchrun", path=(f"{venv}/bin:" if venv else "") +
                            os.environ.get("PATH", ""))
    if not os.path.exists(air) or torchrun is None:
        sys.exit(f"need the air binary ({air}) and torchrun (AIR_VENV or PATH)")
    with tempfile.TemporaryDirectory(prefix="air_startup_bench_") as tmp:
        work = pathlib.Path(tmp)
        air_lat, air_ret = measure_air(air, work, args.iterations)
        torch_lat = measure_torchrun(torchrun, work, args.iterations)
        bare_lat = measure_bare(work, args.iterations)
    air_med = statistics.median(air_lat)
    torch_med = statistics.median(torch_lat)
    bare_med = statistics.median(bare_lat)
    overhead_ms = (air_med - bare_med) * 1000
    print("startup: launcher start -> trivial worker running on both of 2 nodes")
    print(describe("air run (2 local nodes)", air_lat))
    print(describe("  (the air run command itself returned)", air_ret))
    print(describe("torchrun x2 (--nnodes=2, --no-python)", torch_lat))
    print(describe("bare bash x2 (no launcher)", bare_lat))
    print(f"ratio air/torchrun: {air_med / torch_med:.3f}  (air is {torch_med / air_med:.1f}x "
          f"faster to start the same workers)")
    print(f"air's own overhead (air - bare): {overhead_ms:.1f} ms  "
          f"[goal < 100 ms: {'met' if overhead_ms < 100 else 'NOT met'}]")


if __name__ == "__main__":
    main()
