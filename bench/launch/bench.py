#!/usr/bin/env python3
"""Launcher startup: air launch vs the real torchrun, side by side in the same run.

Both start the same workers (a tiny Python script that records the wall-clock time it began
and exits) on one node, and the bench measures
  to running   from starting the launcher to the last worker's first line of Python
  total        from starting the launcher until it exits (workers done, launcher torn down)
over --repeats runs each (interleaved), and prints the medians and the ratios torchrun/air.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/launch/bench.py [--nproc 2]
"""
import argparse
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
WORKER = "import os, sys, time\nopen(os.path.join(sys.argv[1], os.environ['RANK']), 'w')" \
         ".write(repr(time.time()))\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def once(argv, out: pathlib.Path, nproc: int, env):
    for f in out.iterdir():
        f.unlink()
    start = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    end = time.time()
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} failed:\n{proc.stdout}\n{proc.stderr}")
    started = [float((out / str(r)).read_text()) for r in range(nproc)]
    return max(started) - start, end - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    bindir = os.path.dirname(sys.executable)
    torchrun = os.path.join(bindir, "torchrun")
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1")
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True,
                         text=True).stdout.strip()
    print(f"{cpu}; {os.cpu_count()} CPUs; {args.nproc} workers; {args.repeats} runs each")
    with tempfile.TemporaryDirectory(prefix="air_bench_launch_") as tmp:
        work = pathlib.Path(tmp)
        script = work / "worker.py"
        script.write_text(WORKER)
        out = work / "out"
        out.mkdir()
        times = {"air launch": [], "torchrun": []}
        for _ in range(args.repeats):
            for name in times:
                launcher = [air, "launch"] if name == "air launch" else [torchrun]
                argv = [*launcher, "--nnodes", "1", "--nproc-per-node", str(args.nproc),
                        "--master-port", str(free_port()), str(script), str(out)]
                times[name].append(once(argv, out, args.nproc, env))
    med = {name: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
           for name, ts in times.items()}
    print(f"{'launcher':12} {'to running s':>13} {'total s':>9}")
    for name, (running, total) in med.items():
        print(f"{name:12} {running:13.3f} {total:9.3f}")
    a, t = med["air launch"], med["torchrun"]
    print(f"torchrun/air: to running {t[0] / a[0]:.1f}x, total {t[1] / a[1]:.1f}x")


if __name__ == "__main__":
    main()
