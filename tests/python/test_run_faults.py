"""Fault tests of the runtime with the real binary: a failing node stops the attempt fast with
nothing left behind, retries as fresh attempts, timeouts, workers that trap SIGTERM, cancel,
a killed `--watch`, concurrent runs, and an uninstallable dependency."""
import json
import os
import signal
import subprocess
import time

import pytest

from runtime_jobs.helpers import (assert_no_processes_left, get, kill_run_processes,
                                  nodes_running, submit, wait_for, wait_terminal, write_spec)


@pytest.fixture(autouse=True)
def short_grace(monkeypatch):
    monkeypatch.setenv("AIR_STOP_GRACE_SECONDS", "3")


def test_node_exiting_3_fails_the_run_within_2s_and_leaves_nothing(air, air_home, tmp_path):
    marker = tmp_path / "node1_exit_time"
    command = f"""
if [ "$NODE_RANK" = 1 ]; then
  sleep 0.5
  echo "node 1 giving up"
  echo $EPOCHREALTIME > {marker}
  exit 3
fi
sleep 60 &   # a background job in the node's group
sleep 60
"""
    run_id = submit(air, write_spec(tmp_path, command, nodes=2))
    try:
        run = wait_terminal(air, run_id, timeout=20)
        assert run["state"] == "FAILED"
        exited_at = float(marker.read_text())
        assert run["ended_us"] / 1e6 - exited_at < 2.0, "FAILED more than 2 s after the exit"
        summary = run["failure_summary"]
        assert "node 1 exited with code 3" in summary
        assert "node 1 giving up" in summary  # the last log lines
        nodes = run["attempt_details"][0]["nodes"]
        assert [n["state"] for n in nodes] == ["STOPPED", "EXITED"]
        assert nodes[1]["exit_code"] == 3
        assert_no_processes_left(air_home, run)
        text = air("get", run_id, check=True).stdout
        assert "node 1 exited with code 3" in text
    finally:
        kill_run_processes(air_home, run_id)


def test_failing_only_on_attempt_0_succeeds_after_a_retry(air, air_home, tmp_path):
    # On attempt 0 each node waits until both have printed, so that neither is stopped (by the
    # other's failure) before its line is in the log.
    command = f"""
echo "attempt $AIR_ATTEMPT node $NODE_RANK port $MASTER_PORT"
if [ "$AIR_ATTEMPT" = 0 ]; then
  echo "first attempt fails"
  touch {tmp_path}/printed_$NODE_RANK
  for i in $(seq 200); do
    [ -e {tmp_path}/printed_0 ] && [ -e {tmp_path}/printed_1 ] && break
    sleep 0.05
  done
  exit 1
fi
echo "second attempt works"
"""
    run_id = submit(air, write_spec(tmp_path, command, nodes=2, max_retries=2))
    run = wait_terminal(air, run_id, timeout=30)
    assert run["state"] == "SUCCEEDED", run
    assert run["attempts"] == 2
    first, second = run["attempt_details"]
    assert first["state"] == "FAILED" and second["state"] == "SUCCEEDED"
    assert first["master_port"] != second["master_port"]  # a fresh port per attempt
    for node in (0, 1):
        old = air("logs", run_id, "--node", node, "--retry", "0", check=True).stdout
        new = air("logs", run_id, "--node", node, "--retry", "1", check=True).stdout
        latest = air("logs", run_id, "--node", node, check=True).stdout
        assert f"attempt 0 node {node}" in old
        assert f"attempt 1 node {node}" in new and "second attempt works" in new
        assert latest == new
    events = [e for e in _events(air_home, run_id) if e[0] == "retry"]
    assert len(events) == 1
    assert_no_processes_left(air_home, run)


def test_sleeping_past_the_timeout_ends_timed_out(air, air_home, tmp_path, monkeypatch):
    monkeypatch.setenv("AIR_TEST_MINUTE_SECONDS", "1")  # timeout_minutes: 2 -> 2 s
    run_id = submit(air, write_spec(tmp_path, "echo working; sleep 60", nodes=2,
                                    timeout_minutes=2, max_retries=3))
    run = wait_terminal(air, run_id, timeout=20)
    assert run["state"] == "TIMED_OUT"
    assert run["attempts"] == 1  # a timeout is not retried
    assert 1.5 < run["duration_s"] < 8
    assert "timeout_minutes: 2" in run["failure_summary"]
    assert all(n["state"] == "STOPPED" for n in run["attempt_details"][0]["nodes"])
    assert_no_processes_left(air_home, run)


def test_a_worker_that_traps_sigterm_and_exits_0_is_not_a_success(air, air_home, tmp_path):
    command = """
if [ "$NODE_RANK" = 0 ]; then
  trap 'echo "trapped SIGTERM, exiting 0"; exit 0' TERM
  echo ready
  sleep 60 & wait
fi
sleep 1
exit 2
"""
    run_id = submit(air, write_spec(tmp_path, command, nodes=2))
    run = wait_terminal(air, run_id, timeout=20)
    assert run["state"] == "FAILED"
    node0 = run["attempt_details"][0]["nodes"][0]
    assert node0["state"] == "STOPPED" and node0["exit_code"] == 0
    assert "trapped SIGTERM" in air("logs", run_id, "--node", 0, check=True).stdout
    assert_no_processes_left(air_home, run)


def test_a_trapping_worker_at_timeout_is_timed_out(air, air_home, tmp_path, monkeypatch):
    monkeypatch.setenv("AIR_TEST_MINUTE_SECONDS", "1")
    command = "trap 'exit 0' TERM; sleep 60 & wait"
    run_id = submit(air, write_spec(tmp_path, command, nodes=1, timeout_minutes=1))
    run = wait_terminal(air, run_id, timeout=20)
    assert run["state"] == "TIMED_OUT"


def test_cancel_stops_every_process(air, air_home, tmp_path):
    command = "echo started; sleep 60 & setsid sleep 61 & wait"
    run_id = submit(air, write_spec(tmp_path, command, nodes=2))
    try:
        wait_for(air, run_id, nodes_running, timeout=20)
        assert air("list", check=True).stdout.count("RUNNING") == 1
        proc = air("cancel", run_id, timeout=30)
        assert proc.returncode == 0, proc.stderr
        assert f"run {run_id} CANCELED" in proc.stdout
        run = get(air, run_id)
        assert run["state"] == "CANCELED"
        assert_no_processes_left(air_home, run)
        again = air("cancel", run_id, check=True)
        assert "already ended CANCELED" in again.stdout
    finally:
        kill_run_processes(air_home, run_id)


def test_cancel_all_and_cancel_of_a_pending_run(air, air_home, tmp_path):
    a = submit(air, write_spec(tmp_path, "sleep 60", nodes=1, filename="a.yaml"))
    b = submit(air, write_spec(tmp_path, "sleep 60", nodes=1, filename="b.yaml"))
    try:
        code, env = air.json("cancel", "--all", timeout=30)
        assert code == 0, env
        assert sorted(r["run_id"] for r in env["data"]["runs"]) == [a, b]
        assert {get(air, a)["state"], get(air, b)["state"]} == {"CANCELED"}
    finally:
        kill_run_processes(air_home, a)
        kill_run_processes(air_home, b)


def test_killing_the_cli_during_watch_leaves_the_run_running(air_bin, air_home, air, tmp_path):
    done = tmp_path / "done"
    command = f'echo "watch me"; sleep 2; echo finished > {done}'
    spec = write_spec(tmp_path, command, nodes=2)
    for sig in (signal.SIGINT, signal.SIGKILL):
        if done.exists():
            done.unlink()
        watcher = subprocess.Popen([air_bin, "run", "-f", spec, "--watch"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        run_id = int(watcher.stdout.readline().strip())
        assert watcher.stdout.readline().strip() == "watch me"
        os.killpg(watcher.pid, sig)  # like Ctrl-C on the terminal: the CLI's whole group
        watcher.wait(timeout=10)
        run = get(air, run_id)
        assert run["state"] == "RUNNING", run
        run = wait_terminal(air, run_id, timeout=30)
        assert run["state"] == "SUCCEEDED"
        assert done.read_text() == "finished\n"


def test_two_runs_at_once_do_not_interfere(air, air_home, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    command = (f'echo "$AIR_RUN_ID $NODE_RANK $MASTER_PORT $CODE_SOURCE_PATH" > '
               f'{out}/run_${{AIR_RUN_ID}}_node_${{NODE_RANK}}; echo "run $AIR_RUN_ID says hi"; '
               f'sleep 1')
    a = submit(air, write_spec(tmp_path, command, name="first", nodes=2, filename="a.yaml"))
    b = submit(air, write_spec(tmp_path, command, name="second", nodes=2, filename="b.yaml"))
    ra, rb = wait_terminal(air, a), wait_terminal(air, b)
    assert ra["state"] == rb["state"] == "SUCCEEDED"
    # They overlapped in time.
    assert ra["started_us"] < rb["ended_us"] and rb["started_us"] < ra["ended_us"]
    assert ra["attempt_details"][0]["master_port"] != rb["attempt_details"][0]["master_port"]
    seen = {}
    for run_id in (a, b):
        for node in (0, 1):
            rid, rank, port, path = (out / f"run_{run_id}_node_{node}").read_text().split()
            assert (rid, rank) == (str(run_id), str(node))
            seen[(run_id, node)] = path
            logs = air("logs", run_id, "--node", node, check=True).stdout
            assert f"run {run_id} says hi" in logs
            other = b if run_id == a else a
            assert f"run {other} says hi" not in logs
    assert len(set(seen.values())) == 4


def test_uninstallable_dependency_fails_before_the_command(air, air_home, tmp_path,
                                                          monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # no network: fail fast and deterministically
    ran = tmp_path / "command_ran"
    spec = write_spec(tmp_path, f"touch {ran}", nodes=2,
                      environment={"dependencies": ["air-test-no-such-package==9.9.9"]})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    assert run["state"] == "FAILED"
    assert run["attempts"] == 0
    assert not ran.exists()
    assert "no command was started" in run["failure_summary"]
    assert "air-test-no-such-package" in run["failure_summary"]
    assert "No matching distribution found" in run["failure_summary"]  # pip's own words
    logs = air("logs", run_id, check=True).stdout
    assert "No matching distribution found for air-test-no-such-package==9.9.9" in logs
    assert not any((air_home / "envs").glob("*/bin"))  # the broken env is not kept


def _events(air_home, run_id):
    import sqlite3
    db = sqlite3.connect(air_home / "air.db")
    return db.execute("SELECT kind, message FROM events WHERE run_id = ? ORDER BY id",
                      (run_id,)).fetchall()


def test_sigterm_to_the_supervisor_cancels_the_run(air, air_home, tmp_path):
    run_id = submit(air, write_spec(tmp_path, "sleep 60", nodes=2))
    try:
        run = wait_for(air, run_id, nodes_running, timeout=20)
        os.kill(run["supervisor_pid"], signal.SIGTERM)
        run = wait_terminal(air, run_id, timeout=20)
        assert run["state"] == "CANCELED"
        assert_no_processes_left(air_home, run)
    finally:
        kill_run_processes(air_home, run_id)


def test_a_killed_supervisor_leaves_no_node_and_the_run_becomes_internal_error(
        air, air_home, tmp_path):
    run_id = submit(air, write_spec(tmp_path, "sleep 60", nodes=2))
    try:
        run = wait_for(air, run_id, nodes_running, timeout=20)
        os.kill(run["supervisor_pid"], signal.SIGKILL)
        # Its agents get SIGTERM (parent-death signal) and stop their nodes.
        assert_no_processes_left(air_home, run, timeout=10)
        run = get(air, run_id)  # `air get` notices the supervisor is gone
        assert run["state"] == "INTERNAL_ERROR"
        assert str(run["supervisor_pid"]) in run["failure_summary"]
        # Nothing under the ended run is left RUNNING: the attempt is closed, and the nodes
        # carry what their agents reported (stopped by the parent-death signal).
        attempt = run["attempt_details"][0]
        assert attempt["state"] == "INTERNAL_ERROR" and attempt["ended_us"], attempt
        assert [n["state"] for n in attempt["nodes"]] == ["STOPPED", "STOPPED"], attempt
    finally:
        kill_run_processes(air_home, run_id)
