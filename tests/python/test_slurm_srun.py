"""`air launch` and `air train` directly under `srun` on the real cluster (docs/slurm.md, "Under
srun without air's runtime"), for users who write their own sbatch scripts: `srun -N2
--ntasks-per-node=1 air launch --nproc-per-node 2 allreduce.py` takes each node's place from
Slurm (SLURM_NODEID, SLURM_STEP_NUM_NODES, the step's first host as MASTER_ADDR) and runs a
torch.distributed gloo job across two Slurm nodes; `srun -N1 -n1 air train` trains a tiny Llama
as the step's one rank and `srun -N2 --ntasks-per-node=1 air train` as two ranks on two nodes
(FSDP over gloo, the same losses); several tasks per node are refused for air launch with the
srun option that fixes it."""
import json
import os
import pathlib
import subprocess
import sys

from test_train_cli import make_model, write_config, write_pretokenized
from runtime_jobs.helpers import free_port
from runtime_jobs.slurm_cluster import slurm_cluster  # noqa: F401 (fixture)

JOBS = pathlib.Path(__file__).parent / "launch_jobs"
VENV_BIN = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")


def srun(*args, env, timeout=240):
    return subprocess.run(["srun", "--partition=debug", "--kill-on-bad-exit=1", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_air_launch_under_srun_on_two_nodes_all_reduces(air_bin, slurm_cluster, tmp_path):
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ["PATH"], JOB_OUT=str(tmp_path))
    env.pop("OMP_NUM_THREADS", None)
    port = free_port()
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
    # One air train per Slurm node (SLURM_PROCID/SLURM_NTASKS/SLURM_NODEID; the user's sbatch
    # script exports MASTER_ADDR/PORT): one model sharded across the two nodes (FSDP over gloo).
    port = free_port()
    two = tmp_path / "two"
    cfg2 = write_config(tmp_path / "c2.yaml", model_name=str(model_dir), dataset_name=str(data),
                        output_dir=str(two), per_device_batch_size=1, max_steps=3,
                        logging_steps=1, save_steps=3, seed=3)
    proc = srun("--nodes=2", "--ntasks-per-node=1", air_bin, "train", "--config", cfg2,
                "--threads", 1,
                env=dict(env, MASTER_ADDR="node1", MASTER_PORT=str(port)))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "over gloo" in proc.stdout and "trained 3 steps" in proc.stdout, proc.stdout
    assert (two / "model.safetensors").is_file()
    two_steps = [json.loads(l) for l in (two / "metrics.jsonl").read_text().splitlines()]
    one_steps = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    # 1 rank x 2 rows and 2 ranks x 1 row train on the same global batches.
    diff = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(one_steps, two_steps))
    print(f"srun: 2 ranks on 2 nodes vs 1 rank: max relative loss diff {diff:.3g}")
    assert [m["step"] for m in two_steps] == [1, 2, 3] and diff <= 1e-5, (one_steps, two_steps)
