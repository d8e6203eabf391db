#!/usr/bin/env python3
"""@distributed round trip vs the local peers, and the cost of a 100 MB argument.

Round trip: the wall time from the call until a trivial function (it returns its RANK) has
run on every rank and the values are back in the caller, 2 ranks on this machine:
  air        `@distributed(gpus=2, gpu_type='CPU', remote=False)(f).distributed()`: cloudpickle,
             `air run -o json`, supervisor, agent, torchrun, 2 workers, results collected
  mp.spawn   `torch.multiprocessing.spawn(f, nprocs=2)`, values returned through a
             multiprocessing queue (the peer the issue names)
  torchrun   a TorchDistributor-style local launch: `python -m torch.distributed.run
             --nproc_per_node=2 worker.py`, values returned through files
100 MB: the same three with a 100 MB `bytes` argument (each rank returns its length), and
cloudpickle.dumps/loads of that argument alone. Prints medians, ratios, the CPU model, and
where air's trivial call spends its time (median per phase, from the call's own timings and
the run's record in `air get -o json`).

  AIR_BIN=build/bin/air PYTHONPATH=python $VENV/bin/python bench/distributed_startup/bench.py \
      [--iterations 5]
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
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "bench"))
import cpu_info  # noqa: E402 (the machine line every benchmark prints)
MB = 1 << 20


def trivial(payload=b""):
    return int(os.environ.get("RANK", "0")) + len(payload) * 0


def sized(payload=b""):
    return len(payload)


def _spawned(index, fn, payload, queue):
    os.environ["RANK"] = str(index)
    queue.put((index, fn(payload)))


def run_mp_spawn(fn, payload):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(_spawned, args=(fn, payload, queue), nprocs=2, join=True)
    return [v for _, v in sorted(queue.get() for _ in range(2))]


WORKER = """
import os, pickle, sys
sys.path.insert(0, {bench_dir!r})
import bench
with open({arg!r}, "rb") as f:
    payload = pickle.load(f)
with open(os.path.join({out!r}, os.environ["RANK"]), "wb") as f:
    pickle.dump(getattr(bench, {name!r})(payload), f)
"""


def run_torchrun(fn, payload, work: pathlib.Path):
    import pickle
    out = pathlib.Path(tempfile.mkdtemp(dir=work))
    arg = out / "arg.pkl"
    arg.write_bytes(pickle.dumps(payload))
    script = out / "worker.py"
    script.write_text(WORKER.format(bench_dir=str(pathlib.Path(__file__).parent), arg=str(arg),
                                    out=str(out), name=fn.__name__))
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node=2", str(script)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return [pickle.loads((out / str(r)).read_bytes()) for r in range(2)]


PHASES = []  # one dict per air call: phase -> seconds


def air_phases(result) -> dict:
    """Where one air call's time went: the call's timings (seconds since the epoch) and the
    run's record (microseconds) of `air get RUN -o json`."""
    t = dict(result.timings)
    t.setdefault("ranks_running", t["ended"])  # a call over before the caller saw its ranks
    run = json.loads(subprocess.run([os.environ.get("AIR_BIN", "air"), "-o", "json", "get",
                                     str(result.run_id)], capture_output=True,
                                    text=True).stdout.splitlines()[-1])["data"]
    attempt = run["attempt_details"][-1]
    nodes_started = max(n["started_us"] for n in attempt["nodes"]) / 1e6
    nodes_ended = max(n["ended_us"] for n in attempt["nodes"]) / 1e6
    return {
        "pickle + stage the call": t["prepared"] - t["call"],
        "air run (validate, store, start the supervisor)": t["submitted"] - t["prepared"],
        "supervisor: claim, prepare, launch agents": attempt["started_us"] / 1e6 - t["submitted"],
        "agents start the node commands": nodes_started - attempt["started_us"] / 1e6,
        "air launch + ranks start (python, import air)": t["ranks_running"] - nodes_started,
        "the function, results, node exit": nodes_ended - t["ranks_running"],
        "run ends, the caller sees it and loads results": t["returned"] - nodes_ended,
    }


def run_air(fn, payload):
    import air
    with open(os.devnull, "w") as sink:  # the per-rank log lines are not what is measured
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = sink
        try:
            result = air.distributed(gpus=2, gpu_type="CPU", remote=False,
                                     code_dir=None)(fn).distributed(payload)
        finally:
            sys.stdout, sys.stderr = saved
    if not payload:
        PHASES.append(air_phases(result))
    return list(result)


def timed(call, iterations, expect):
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        got = call()
        times.append(time.perf_counter() - start)
        assert got == expect, got
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    import cloudpickle
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        os.environ.setdefault("AIR_HOME", str(work / "air_home"))
        big = os.urandom(100 * MB)
        n = args.iterations
        rows = {}
        for label, fn, payload, expect in (("trivial", trivial, b"", [0, 1]),
                                           ("100 MB argument", sized, big, [len(big)] * 2)):
            rows[label] = {
                "air": timed(lambda: run_air(fn, payload), n, expect),
                "mp.spawn": timed(lambda: run_mp_spawn(fn, payload), n, expect),
                "torchrun": timed(lambda: run_torchrun(fn, payload, work), n, expect),
            }
        start = time.perf_counter()
        blob = cloudpickle.dumps(big)
        dumps_s = time.perf_counter() - start
        start = time.perf_counter()
        cloudpickle.loads(blob)
        loads_s = time.perf_counter() - start
    print(f"CPU: {cpu_info.describe()}; median of {n}; 2 ranks, one machine")
    for label, r in rows.items():
        print(f"{label:>16}: air {r['air']:.3f} s | mp.spawn {r['mp.spawn']:.3f} s | "
              f"torchrun {r['torchrun']:.3f} s | air/mp.spawn {r['air'] / r['mp.spawn']:.2f}x | "
              f"air/torchrun {r['air'] / r['torchrun']:.2f}x")
    extra = {k: rows["100 MB argument"][k] - rows["trivial"][k] for k in rows["trivial"]}
    print(f"100 MB argument adds: air {extra['air']:.3f} s | mp.spawn {extra['mp.spawn']:.3f} s "
          f"| torchrun {extra['torchrun']:.3f} s")
    print(f"cloudpickle of 100 MB bytes: dumps {dumps_s * 1e3:.1f} ms, loads {loads_s * 1e3:.1f} "
          f"ms ({100 / dumps_s:.0f} MB/s dumps)")
    print("where air's trivial call spends its time (median of each phase):")
    for phase in PHASES[0]:
        print(f"  {phase:<50} {statistics.median(p[phase] for p in PHASES) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
