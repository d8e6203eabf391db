"""A real PyTorch job, unchanged, on 2 local nodes x 2 processes: torchrun reads the rendezvous
environment air sets (NUM_NODES, NODE_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), the 4
ranks all-reduce over gloo, and each node's log is readable with `air logs --node`."""
import json

from runtime_jobs.helpers import (allreduce_spec, assert_no_processes_left, explain, submit,
                                  wait_terminal)


def test_torchrun_job_on_two_nodes_all_reduces(air, air_home, tmp_path, monkeypatch):
    spec, out = allreduce_spec(tmp_path, monkeypatch)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=240)
    logs = {n: air("logs", run_id, "--node", n, check=True).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", explain(run, logs)
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
