"""No orphans in any death order (issue 12): a node command that leaves a setsid'd double-fork
grandchild and a background job ignoring SIGTERM/SIGHUP, on 2 nodes, with the supervisor, the
agents, or both SIGKILLed. Whatever dies, nothing of the run is left shortly after the
supervisor (agents killed alone), `air get` (reconcile) or `air cancel` has acted; under every
process tracker this machine offers (cgroup v2, v1 freezer, the session/token fallback)."""
import json
import os
import signal
import time

import pytest

from runtime_jobs.helpers import (get, kill_run_processes, nodes_running, run_processes, submit,
                                  wait_for, wait_terminal, write_spec)

# The reproduction: a double-forked setsid grandchild, and a job that ignores TERM/HUP.
COMMAND = "(setsid nohup sleep 312 >/dev/null 2>&1 &); trap '' TERM HUP; sleep 311 & wait"

TRACKERS = ["auto", "cgroup2", "freezer", "session"]


@pytest.fixture(autouse=True)
def long_grace(monkeypatch):
    # Longer than any bound below: nothing may rely on the agents' own grace period.
    monkeypatch.setenv("AIR_STOP_GRACE_SECONDS", "30")


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _wait_none_left(air_home, run_id, agents, bound=10.0):
    """Polls for absence; the bound is generous (the claim is 'eventually, bounded')."""
    deadline = time.monotonic() + bound
    while True:
        left = run_processes(air_home, run_id)
        live_agents = [p for p in agents if _alive(p)]
        if not left and not live_agents:
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"left behind: processes {left}, agents {live_agents}")
        time.sleep(0.05)


def _start(air, air_home, tmp_path, monkeypatch, tracker):
    if tracker != "auto":
        monkeypatch.setenv("AIR_PROCESS_TRACKER", tracker)
    run_id = submit(air, write_spec(tmp_path, COMMAND, nodes=2))
    run = wait_for(air, run_id, nodes_running, timeout=30)
    # Both grandchildren of both nodes are up before anything is killed.
    deadline = time.monotonic() + 20
    while len(run_processes(air_home, run_id)) < 6:  # per node: bash, sleep 311, sleep 312
        assert time.monotonic() < deadline, run_processes(air_home, run_id)
        time.sleep(0.05)
    tracker_file = air_home / "runs" / str(run_id) / "attempt_0" / "node_0.tracker"
    if tracker != "auto" or tracker_file.exists():
        info = json.loads(tracker_file.read_text())
        assert tracker == "auto" or info["kind"] == tracker
        print(f"tracker {tracker}: {info['kind']} {info['cgroup']}")
    agents = [n["agent_pid"] for n in run["attempt_details"][0]["nodes"]]
    return run_id, run, agents


def _machine_offers(kind):
    """What the kernel and mounts here allow, read independently of air."""
    mounts = open("/proc/self/mountinfo").read().splitlines()
    if kind == "cgroup2":
        return any(" - cgroup2 " in m for m in mounts)
    if kind == "freezer":
        return any(" - cgroup " in m and "freezer" in m.split(" - ")[1] for m in mounts)
    return True


@pytest.mark.parametrize("tracker", TRACKERS)
@pytest.mark.parametrize("order", ["supervisor", "agents", "both", "both-then-cancel"])
def test_no_orphans_in_any_death_order(air, air_home, tmp_path, monkeypatch, tracker, order):
    if not _machine_offers(tracker):
        # Not a skip: forcing a kind the machine lacks must be a clear failure of the run.
        monkeypatch.setenv("AIR_PROCESS_TRACKER", tracker)
        run_id = submit(air, write_spec(tmp_path, "true", nodes=1))
        run = wait_terminal(air, run_id, timeout=30)
        assert run["state"] == "FAILED"
        assert f"AIR_PROCESS_TRACKER={tracker}" in run["failure_summary"]
        return
    run_id, run, agents = _start(air, air_home, tmp_path, monkeypatch, tracker)
    try:
        supervisor = run["supervisor_pid"]
        if order in ("supervisor", "both", "both-then-cancel"):
            os.kill(supervisor, signal.SIGKILL)
        if order in ("agents", "both", "both-then-cancel"):
            for pid in agents:
                os.kill(pid, signal.SIGKILL)
        if order == "agents":
            # The live supervisor notices its lost agents and kills what they left.
            run = wait_terminal(air, run_id, timeout=30)
            assert run["state"] == "FAILED", run
            assert "was lost" in run["failure_summary"]
            _wait_none_left(air_home, run_id, agents)
            return
        while _alive(supervisor):
            time.sleep(0.01)
        if order == "both-then-cancel":
            proc = air("cancel", run_id, timeout=60)
            assert proc.returncode == 0, proc.stderr
            assert f"run {run_id} CANCELED" in proc.stdout, proc.stdout
            _wait_none_left(air_home, run_id, agents)
            run = get(air, run_id)
            assert run["state"] == "CANCELED", run
            return
        started = time.monotonic()
        run = get(air, run_id)  # reconcile: kills what the dead supervisor left, then marks
        ended = _wait_none_left(air_home, run_id, agents)
        assert run["state"] == "INTERNAL_ERROR", run
        assert str(supervisor) in run["failure_summary"]
        assert "were killed" in run["failure_summary"], run["failure_summary"]
        print(f"{order}/{tracker}: nothing left {ended - started:.3f} s after `air get`")
        attempt = run["attempt_details"][0]
        assert attempt["ended_us"] and all(n["state"] != "RUNNING" for n in attempt["nodes"])
        # Nothing of the node's tracking is left behind either.
        for node in (0, 1):
            info = json.loads((air_home / "runs" / str(run_id) / "attempt_0" /
                               f"node_{node}.tracker").read_text())
            for cgroup in (info["cgroup"], info["memory_cgroup"]):
                assert not cgroup or not os.path.exists(cgroup), info
    finally:
        kill_run_processes(air_home, run_id)


def test_cancel_of_an_ended_run_stops_what_it_left(air, air_home, tmp_path):
    """A run marked ended while its processes lived on (as reconcile did before this fix, when a
    dead supervisor's agents had been killed too): `air cancel` still finds and stops them."""
    run_id = submit(air, write_spec(tmp_path, COMMAND, nodes=1))
    try:
        run = wait_for(air, run_id, nodes_running, timeout=30)
        os.kill(run["supervisor_pid"], signal.SIGSTOP)  # frozen: alive, but does nothing
        import sqlite3
        db = sqlite3.connect(air_home / "air.db")
        db.execute("UPDATE runs SET state = 'INTERNAL_ERROR' WHERE id = ?", (run_id,))
        db.commit()
        db.close()
        os.kill(run["attempt_details"][0]["nodes"][0]["agent_pid"], signal.SIGKILL)
        os.kill(run["supervisor_pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while len(run_processes(air_home, run_id)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc = air("cancel", run_id, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "had already ended INTERNAL_ERROR; stopped" in proc.stdout, proc.stdout
        assert not run_processes(air_home, run_id)
    finally:
        kill_run_processes(air_home, run_id)
