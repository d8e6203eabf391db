#!/usr/bin/env python3
"""Startup latency on a real Slurm cluster: `air run` (Slurm backend) vs a hand-written
`sbatch` + `srun torchrun` script, the same cluster, the same torchrun workers, one run.

For each launcher we measure the wall time from starting the submit command until every worker
process runs (each of the 2 nodes x 2 torchrun workers writes time.time() as its first action):
  air    `air run -f spec.yaml` with AIR_HOME/config.yaml `backend: slurm`: CLI -> store ->
         detached supervisor -> sbatch -> srun -> `air slurm-node` per node -> torchrun
  sbatch a batch script as users write it: MASTER_ADDR from `scontrol show hostnames`, then
         `srun bash -c 'torchrun --node_rank=$SLURM_NODEID ...'`
Both ask Slurm for the same allocation (2 nodes, 1 task per node, 2 CPUs per task); the
iterations alternate so both see the same cluster state. Prints medians and the ratio.

  scripts/slurm/start.sh            # once: the local cluster (or point SLURM_CONF at yours)
  AIR_BIN=build/bin/air $VENV/bin/python bench/slurm_startup/bench.py [--iterations 5]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
WORKER = """import os, time
stamp = time.time()
with open(os.path.join(os.environ["OUT"], f"{os.environ['TAG']}_{os.environ['RANK']}"), "w") as f:
    f.write(repr(stamp))
"""
TORCHRUN = ("torchrun --nnodes=$NUM_NODES --node_rank=$NODE_RANK "
            "--nproc_per_node=$LOCAL_WORLD_SIZE --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT worker.py")
SBATCH = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --output={out}/slurm-%j.out
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=$((10000 + SLURM_JOB_ID % 50000))
cd {code}
srun bash -c 'torchrun --nnodes=$SLURM_NNODES --node_rank=$SLURM_NODEID --nproc_per_node=2 \\
  --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT worker.py'
"""


def wait_for_files(paths, timeout=120.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return [float(p.read_text()) for p in paths]
        except (FileNotFoundError, ValueError, SyntaxError):
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers did not start: {paths}")
            time.sleep(0.005)


def wait_queue_empty(timeout=60.0):
    deadline = time.monotonic() + timeout
    while subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True,
                         text=True).stdout.strip():
        if time.monotonic() > deadline:
            raise TimeoutError("the cluster did not become idle")
        time.sleep(0.05)


def stamps(out, tag):
    return [out / f"{tag}_{r}" for r in range(4)]


def measure_air(air, work, code, out, i):
    home = work / "air_home"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text("backend: slurm\n")
    tag = f"air{i}"
    spec = work / f"air{i}.yaml"
    spec.write_text(
        "experiment_name: slurm-startup\n"
        "compute: {accelerator_type: CPU_2, num_accelerators: 4}\n"
        f"command: '{TORCHRUN}'\n"
        f"code_source: {{type: snapshot, snapshot: {{root_path: {code}}}}}\n"
        f"env_variables: {{OUT: '{out}', TAG: '{tag}', OMP_NUM_THREADS: '1'}}\n")
    env = dict(os.environ, AIR_HOME=str(home))
    t0 = time.time()
    proc = subprocess.run([air, "run", "-f", str(spec)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"air run failed: {proc.stderr}")
    last = max(wait_for_files(stamps(out, tag)))
    run_id = proc.stdout.strip()
    deadline = time.monotonic() + 120
    while True:
        got = subprocess.run([air, "-o", "json", "get", run_id], capture_output=True, text=True,
                             env=env).stdout
        if '"state":"SUCCEEDED"' in got.replace(" ", ""):
            break
        if time.monotonic() > deadline or '"state":"FAILED"' in got.replace(" ", ""):
            raise RuntimeError(f"air run {run_id} did not succeed: {got}")
        time.sleep(0.1)
    return last - t0


def measure_sbatch(work, code, out, i):
    tag = f"sbatch{i}"
    script = work / f"job{i}.sbatch"
    script.write_text(SBATCH.format(out=out, code=code))
    env = dict(os.environ, OUT=str(out), TAG=tag, OMP_NUM_THREADS="1")
    t0 = time.time()
    subprocess.run(["sbatch", "--parsable", str(script)], check=True, capture_output=True,
                   env=env)
    return max(wait_for_files(stamps(out, tag))) - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    air = os.environ.get("AIR_BIN", str(REPO / "build" / "bin" / "air"))
    if not shutil.which("torchrun"):
        sys.exit("torchrun is not on PATH: source \"$(scripts/venv.sh)/bin/activate\"")
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True,
                         text=True).stdout.strip()
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True,
                           text=True).stdout.split()
    print(f"{cpu}\nSlurm nodes: {' '.join(nodes)} (SLURM_CONF={os.environ.get('SLURM_CONF')})")
    with tempfile.TemporaryDirectory(prefix="air-slurm-bench-") as tmp:
        work = pathlib.Path(tmp)
        code, out = work / "code", work / "out"
        code.mkdir()
        out.mkdir()
        (code / "worker.py").write_text(WORKER)
        results = {"air": [], "sbatch": []}
        for i in range(args.iterations):
            wait_queue_empty()
            results["air"].append(measure_air(air, work, code, out, i))
            wait_queue_empty()
            results["sbatch"].append(measure_sbatch(work, code, out, i))
            print(f"  iteration {i}: air {results['air'][-1]:.3f} s, "
                  f"sbatch+srun {results['sbatch'][-1]:.3f} s", flush=True)
        wait_queue_empty()
    a, s = statistics.median(results["air"]), statistics.median(results["sbatch"])
    print(f"median time from submit to all 4 workers running (2 nodes x 2, {args.iterations} "
          f"runs each):\n  air run (slurm backend)  {a:.3f} s\n"
          f"  sbatch + srun torchrun   {s:.3f} s\n  ratio air/sbatch         {a / s:.2f}")


if __name__ == "__main__":
    main()
