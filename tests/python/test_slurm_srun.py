"""`air launch` and `air train` directly under `srun` on the real cluster (docs/slurm.md, "Under
srun without air's runtime"), for users who write their own sbatch scripts: `srun -N2
--ntasks-per-node=1 air launch --nproc-per-node 2 allreduce.py` takes each node's place from
Slurm (SLURM_NODEID, SLURM_STEP_NUM_NODES, the step's first host as MASTER_ADDR) and runs a
torch.distributed gloo job across two Slurm nodes; `srun -N1 -n1 air train` trains a tiny Llama
as the step's one rank; several tasks per node are refused with the srun option that fixes it."""
import json
import os
import pathlib
import socket
import subprocess
import sys

from test_train_cli import make_model, write_config, write_pretokenized
from runtime_jobs.slurm_cluster import slurm_cluster  # noqa: F401 (fixture)

JOBS = pathlib.Path(__file__).parent / "launch_jobs"
VENV_BIN = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")


def srun(*args, env, timeout=240):
    return subprocess.run(["srun", "--partition=debug", "--kill-on-bad-exit=1", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_air_launch_under_srun_on_two_nodes_all_reduces(air_bin, slurm_cluster, tmp_path):
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ["PATH"], JOB_OUT=str(tmp_path))
    env.pop("OMP_NUM_THREADS", None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = srun("--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=2", air_bin, "launch",
                "--nproc-per-node", 2, "--master-port", port, "--join-timeout", 120,
                JOBS / "allreduce.py", env=env)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    seen = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(4)]
    assert [s["sum"] for s in seen] == [6.0] * 4 and {s["world_size"] for s in seen} == {4}
    assert [(s["group_rank"], s["local_rank"]) for s in seen] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    hosts = sorted({s["host"] for s in seen})
    assert len(hosts) == 2 and all(h.startswith("node") for h in hosts), hosts
    # Node rank = SLURM_NODEID; the store is on the step's first host.
    assert seen[0]["host"] == seen[1]["host"] == hosts[0] and seen[2]["host"] == hosts[1]
    assert {s["master"] for s in seen} == {hosts[0]}

    # Several tasks per node would start each node's workers twice: refused, naming the fix.
    proc = srun("--nodes=1", "--ntasks=2", air_bin, "launch", "--nproc-per-node", 1,
                JOBS / "allreduce.py", env=env)
    assert proc.returncode != 0
    assert "this step has 2 tasks on 1 node(s)" in proc.stderr, proc.stderr
    assert "srun --ntasks-per-node=1" in proc.stderr, proc.stderr


def test_air_train_under_srun_as_the_steps_one_rank(air_bin, slurm_cluster, tmp_path):
    model_dir = tmp_path / "tiny"
    make_model(model_dir)
    data = tmp_path / "data.jsonl"
    write_pretokenized(data)
    out = tmp_path / "out"
    cfg = write_config(tmp_path / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(out), per_device_batch_size=2, max_steps=3,
                       logging_steps=1, save_steps=3, seed=3)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = srun("--nodes=1", "--ntasks=1", air_bin, "train", "--config", cfg, "--threads", 1,
                env=env)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "trained 3 steps" in proc.stdout, proc.stdout
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    steps = [json.loads(l)["step"] for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    # Two srun tasks are two ranks to air train (SLURM_PROCID/SLURM_NTASKS; the user's sbatch
    # script exports MASTER_ADDR/PORT): refused until the sharded trainer exists, rather than
    # two duplicate trainings.
    proc = srun("--nodes=1", "--ntasks=2", air_bin, "train", "--config", cfg, "--dry-run",
                env=dict(env, MASTER_ADDR="node1", MASTER_PORT="29555"))
    assert proc.returncode != 0
    assert "WORLD_SIZE=2 (" in proc.stderr and "runs as a single process" in proc.stderr, \
        proc.stderr
    proc = srun("--nodes=1", "--ntasks=2", air_bin, "train", "--config", cfg, "--dry-run",
                env=env)
    assert "MASTER_ADDR is not set: with WORLD_SIZE=2" in proc.stderr, proc.stderr
