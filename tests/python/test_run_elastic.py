"""Elastic retries (compute.min_nodes; docs/state-machine.md) on the local backend with real
processes: lost nodes (their agents SIGKILLed) leave fewer than min_nodes and the run fails
naming them and the rule; a worker's own failure retries at full size; bad min_nodes values are
refused with their line and column. The air train resume on the node left is
test_train_resume.py's; the Slurm one (a node set DOWN) test_slurm_elastic.py's."""
import os
import signal
import time

from runtime_jobs.helpers import explain, get, nodes_running, run_processes, submit, wait_for, \
    wait_terminal, write_spec


def elastic_spec(tmp_path, command, nodes, min_nodes, **extra):
    spec = write_spec(tmp_path, command, name="elastic", nodes=nodes, **extra)
    spec.write_text(spec.read_text().replace(
        f"  num_accelerators: {nodes}\n", f"  num_accelerators: {nodes}\n  min_nodes: {min_nodes}\n"))
    return spec


def test_fewer_than_min_nodes_left_fails_naming_the_lost_nodes_and_the_rule(air, air_home,
                                                                           tmp_path):
    spec = elastic_spec(tmp_path, "sleep 300", nodes=3, min_nodes=2, max_retries=2)
    run_id = submit(air, spec)
    run = wait_for(air, run_id, nodes_running, timeout=60)
    agents = {n["node_rank"]: n["agent_pid"] for n in run["attempt_details"][0]["nodes"]}
    for sig in (signal.SIGSTOP, signal.SIGKILL):  # both gone before either can be stopped
        for rank in (1, 2):
            os.kill(agents[rank], sig)
    run = wait_terminal(air, run_id, timeout=60)
    assert run["state"] == "FAILED", explain(run, {})
    summary = run["failure_summary"]
    assert "attempt 0 lost 2 of its 3 nodes: node 1, node 2" in summary, summary
    assert "1 node left, fewer than compute.min_nodes 2" in summary, summary
    assert run["attempts"] == 1, run  # no retry, although max_retries is 2
    assert run_processes(air_home, run_id) == []


def test_a_workers_own_failure_retries_at_full_size(air, air_home, tmp_path):
    command = ('echo "attempt $AIR_ATTEMPT of $NUM_NODES nodes"; '
               'if [ "$AIR_ATTEMPT" = 0 ] && [ "$NODE_RANK" = 2 ]; then exit 3; fi')
    spec = elastic_spec(tmp_path, command, nodes=3, min_nodes=1, max_retries=1)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=60)
    assert run["state"] == "SUCCEEDED", explain(run, {})
    assert [a["num_nodes"] for a in run["attempt_details"]] == [3, 3], run
    assert "attempt 1 of 3 nodes" in air("logs", run_id, "--node", 2, "--retry", 1).stdout


def test_bad_min_nodes_is_refused_with_its_line_and_column(air, tmp_path):
    for value, message in (("0", "must be between 1 and the node count 2 (2 / 1 per node), got 0"),
                           ("3", "must be between 1 and the node count 2 (2 / 1 per node), got 3"),
                           ("two", "expected an integer")):
        spec = elastic_spec(tmp_path, "true", nodes=2, min_nodes=value)
        proc = air("run", "-f", spec, "--dry-run")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        line = next(i for i, l in enumerate(spec.read_text().splitlines(), 1) if "min_nodes" in l)
        assert f"{spec}:{line}:14: compute.min_nodes: " in proc.stderr, proc.stderr
        assert message in proc.stderr, proc.stderr
