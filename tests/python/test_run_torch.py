"""A real PyTorch job, unchanged, on 2 local nodes x 2 processes: torchrun reads the rendezvous
environment air sets (NUM_NODES, NODE_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), the 4
ranks all-reduce over gloo, and each node's log is readable with `air logs --node`."""
import json
import os
import pathlib
import shutil
import sys

from runtime_jobs.helpers import assert_no_processes_left, submit, wait_terminal, write_spec

JOB_DIR = pathlib.Path(__file__).parent / "runtime_jobs" / "allreduce"
TORCHRUN = ("torchrun --nnodes=$NUM_NODES --node_rank=$NODE_RANK "
            "--nproc_per_node=$LOCAL_WORLD_SIZE --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT job.py")


def test_torchrun_job_on_two_nodes_all_reduces(air, air_home, tmp_path, monkeypatch):
    # torch comes from the project venv: put its bin (torchrun, python) first on PATH.
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    assert os.path.exists(os.path.join(venv_bin, "torchrun")), venv_bin
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    code = tmp_path / "code"
    shutil.copytree(JOB_DIR, code)
    out = tmp_path / "out"
    out.mkdir()
    spec = write_spec(tmp_path, TORCHRUN, name="torch-allreduce", nodes=2, per_node=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"JOB_OUT": str(out), "OMP_NUM_THREADS": "1"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=240)
    logs = {n: air("logs", run_id, "--node", n, check=True).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", (run, logs)
    seen = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(4)]
    assert [s["sum"] for s in seen] == [6.0] * 4  # 0 + 1 + 2 + 3
    assert all(s["world_size"] == 4 for s in seen)
    assert sorted((s["group_rank"], s["local_rank"]) for s in seen) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]
    port = run["attempt_details"][0]["master_port"]
    assert {s["master"] for s in seen} == {f"127.0.0.1:{port}"}
    # Node 1's log holds node 1's ranks (2 and 3), not node 0's.
    node1 = logs[1]
    assert "rank 2/4 on node 1 saw all_reduce sum 6" in node1
    assert "rank 3/4 on node 1 saw all_reduce sum 6" in node1
    assert "on node 0" not in node1
    assert "rank 0/4 on node 0 saw all_reduce sum 6" in logs[0]
    assert_no_processes_left(air_home, run)
