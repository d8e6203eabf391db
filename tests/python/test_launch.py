"""`air launch` (src/launch) against the real torchrun and with real processes: the worker
environment compared key by key with torchrun's, a torch.distributed gloo all-reduce on 2 nodes
x 2 processes (two air launch invocations), air's own process group under air launch, a failed
worker stopping the others and the group restarting, the failure summary, a node that never
joins, a port in use, and air launch under air run (the local backend's node environment)."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from runtime_jobs.helpers import explain, free_port, submit, wait_terminal, write_spec

JOBS = pathlib.Path(__file__).parent / "launch_jobs"
VENV_BIN = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")


@pytest.fixture
def venv_path(monkeypatch):
    """torch comes from the project venv: its bin (torchrun, python3) first on PATH."""
    assert os.path.exists(os.path.join(VENV_BIN, "torchrun")), VENV_BIN
    monkeypatch.setenv("PATH", VENV_BIN + os.pathsep + os.environ["PATH"])
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def launch(air_bin, *args, env=None, timeout=180):
    return subprocess.run([air_bin, "launch", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_envs(directory, world):
    return [json.loads((directory / f"{r}.json").read_text()) for r in range(world)]


def test_worker_environment_matches_torchrun(air_bin, tmp_path, venv_path):
    baseline = set(os.environ) | {"JOB_OUT"}
    for flags in (["--nnodes", "1", "--nproc-per-node", "2"], ["--standalone",
                                                               "--nproc-per-node", "2"]):
        dirs = {}
        for tool in ("torchrun", "air"):
            out = tmp_path / f"{tool}{len(flags)}"
            out.mkdir()
            env = dict(os.environ, JOB_OUT=str(out))
            cmd = flags + ([] if "--standalone" in flags else ["--master-port", free_port()])
            if tool == "torchrun":
                proc = subprocess.run([os.path.join(VENV_BIN, "torchrun"), *map(str, cmd),
                                       str(JOBS / "dump_env.py")], capture_output=True,
                                      text=True, timeout=120, env=env)
            else:
                proc = launch(air_bin, *cmd, JOBS / "dump_env.py", env=env)
            assert proc.returncode == 0, (tool, proc.stdout, proc.stderr)
            dirs[tool] = read_envs(out, 2)
        for rank in (0, 1):
            theirs = {k: v for k, v in dirs["torchrun"][rank].items() if k not in baseline}
            ours = {k: v for k, v in dirs["air"][rank].items() if k not in baseline}
            print(flags, rank, sorted(theirs))
            assert sorted(ours) == sorted(theirs)
            # Ports, run ids of --standalone and error-file paths are chosen per launch.
            differ = {"MASTER_PORT", "TORCHELASTIC_ERROR_FILE"}
            if "--standalone" in flags:
                differ.add("TORCHELASTIC_RUN_ID")
            assert {k: v for k, v in ours.items() if k not in differ} == \
                {k: v for k, v in theirs.items() if k not in differ}
            assert ours["TORCHELASTIC_ERROR_FILE"].endswith(f"/{rank}/error.json")
            assert ours["OMP_NUM_THREADS"] == "1"


def two_nodes(air_bin, script_args, *, env, extra=(), timeout=180):
    port = free_port()
    procs = [subprocess.Popen(
        [air_bin, "launch", "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(port), "--join-timeout", "60",
         *map(str, extra), *map(str, script_args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for node in (0, 1)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        results.append((p.returncode, out, err))
    return results


def test_torch_gloo_all_reduce_on_two_nodes_of_two(air_bin, tmp_path, venv_path):
    env = dict(os.environ, JOB_OUT=str(tmp_path))
    results = two_nodes(air_bin, [JOBS / "allreduce.py"], env=env)
    for code, out, err in results:
        assert code == 0, (out, err)
    seen = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(4)]
    assert [s["sum"] for s in seen] == [6.0] * 4  # 0 + 1 + 2 + 3
    assert [(s["group_rank"], s["local_rank"]) for s in seen] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_air_process_group_under_air_launch_on_two_nodes(air_bin, tmp_path):
    check = str(pathlib.Path(air_bin).parent / "air_collectives_check")
    results = two_nodes(air_bin, ["--no-python", check, "--count", "3001"],
                        env=dict(os.environ, OMP_NUM_THREADS="1"))
    joined = "".join(out for _, out, _ in results)
    for code, out, err in results:
        assert code == 0, (out, err)
    for rank in range(4):
        assert f"rank {rank}/4: ok" in joined
    assert "hosted by the launcher" in joined


def test_failed_worker_stops_the_others_and_the_group_restarts(air_bin, tmp_path, venv_path):
    env = dict(os.environ, JOB_OUT=str(tmp_path), FAIL_RANK="1", FAIL_UNTIL="1",
               IGNORE_TERM="1")
    proc = launch(air_bin, "--nproc-per-node", "3", "--master-port", free_port(),
                  "--max-restarts", "2", "--stop-grace", "1", "--log-dir", tmp_path / "logs",
                  JOBS / "fail.py", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "attempt 0 failed: rank 1 (local rank 1, node 0) on host" in proc.stderr
    assert "exit code 3" in proc.stderr
    assert "restarting the worker group (1 of --max-restarts 2)" in proc.stderr
    assert "attempt 1 failed" not in proc.stderr
    for rank in range(3):
        for attempt in (0, 1):
            assert (tmp_path / f"attempt_{attempt}_rank_{rank}.pid").exists()
        assert not (tmp_path / f"attempt_2_rank_{rank}.pid").exists()
    # The workers of attempt 0 that ignored SIGTERM were SIGKILLed, not left behind.
    for rank in (0, 2):
        assert not alive(int((tmp_path / f"attempt_0_rank_{rank}.pid").read_text()))
    assert (tmp_path / "logs" / "attempt_0" / "node_0" / "1" / "output.log").exists()


def test_the_summary_names_the_first_failure_when_restarts_run_out(air_bin, tmp_path, venv_path):
    env = dict(os.environ, JOB_OUT=str(tmp_path), FAIL_RANK="2", FAIL_HOW="kill")
    proc = launch(air_bin, "--nproc-per-node", "3", "--master-port", free_port(),
                  "--max-restarts", "1", "--stop-grace", "5", JOBS / "fail.py", env=env)
    assert proc.returncode == 1, proc.stderr
    assert "the worker group failed in attempt 1 (1 restart of --max-restarts 1)" in proc.stderr
    assert ("first failure: rank 2 (local rank 2, node 0) on host "
            f"{socket.gethostname()}: signal 9 (KILL)") in proc.stderr
    for attempt in (0, 1):
        for rank in (0, 1):
            assert not alive(int((tmp_path / f"attempt_{attempt}_rank_{rank}.pid").read_text()))


def test_a_failure_on_one_node_stops_the_other(air_bin, tmp_path, venv_path):
    env = dict(os.environ, JOB_OUT=str(tmp_path), FAIL_RANK="3")
    results = two_nodes(air_bin, [JOBS / "fail.py"], env=env, extra=["--stop-grace", "5"])
    for code, _, err in results:
        assert code == 1, err
        assert "first failure: rank 3 (local rank 1, node 1) on host" in err, err
        assert "exit code 3" in err
    for rank in (0, 1, 2):
        assert not alive(int((tmp_path / f"attempt_0_rank_{rank}.pid").read_text()))


def test_a_node_that_never_joins_is_named(air_bin, tmp_path):
    proc = launch(air_bin, "--nnodes", "2", "--node-rank", "0", "--master-port", free_port(),
                  "--join-timeout", "1", "--no-python", "true")
    assert proc.returncode == 1, proc.stderr
    assert "nodes 1 of --nnodes 2 did not join attempt 0 within 1 s" in proc.stderr


def test_a_node_waiting_to_join_learns_node_0s_failure(air_bin, tmp_path):
    """Node 0 gives up on a missing node 2 first: node 1 (still willing to wait) reports node 0's
    finding, and node 0 keeps its store up until node 1 has read it. Before, node 1 saw only
    'lost the rendezvous store' once node 0 exited."""
    port = free_port()
    common = ["--nnodes", "3", "--master-port", port, "--no-python", "true"]
    node0 = subprocess.Popen([air_bin, "launch", "--node-rank", "0", "--join-timeout", "2",
                              *map(str, common)], stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    node1 = launch(air_bin, "--node-rank", "1", "--join-timeout", "60", *common)
    _, node0_err = node0.communicate(timeout=60)
    print(f"node 1 ended {time.monotonic() - started:.1f} s after node 0 started")
    assert node0.returncode == 1, node0_err
    assert node1.returncode == 1, node1.stderr
    missing = "nodes 2 of --nnodes 3 did not join attempt 0 within 2 s"
    assert missing in node0_err, node0_err
    assert missing in node1.stderr, node1.stderr
    assert "lost the rendezvous store" not in node1.stderr, node1.stderr


def test_a_stop_signal_during_the_join_ends_air_launch(air_bin):
    port = free_port()
    proc = subprocess.Popen([air_bin, "launch", "--nnodes", "2", "--master-port", str(port),
                             "--join-timeout", "120", "--no-python", "true"],
                            stderr=subprocess.PIPE, text=True)
    # Node 0's store listens once its stop signals are blocked (they are, before it starts).
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline and proc.poll() is None, "node 0's store never listened"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, err
    assert "got SIGTERM while waiting for the other nodes to join attempt 0" in err, err


def blocks_sigterm(pid: int) -> bool:
    """True once the process has SIGTERM blocked (it then waits for it with sigtimedwait)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(line for line in f if line.startswith("SigBlk:")).split()[1]
    except (FileNotFoundError, StopIteration):
        return False
    return bool(int(mask, 16) & (1 << (signal.SIGTERM - 1)))


def test_a_stop_signal_while_node_0_is_not_there_ends_air_launch(air_bin):
    proc = subprocess.Popen([air_bin, "launch", "--nnodes", "2", "--node-rank", "1",
                             "--master-port", str(free_port()), "--join-timeout", "600",
                             "--no-python", "true"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not blocks_sigterm(proc.pid):
        assert time.monotonic() < deadline and proc.poll() is None, "air launch did not start"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)  # not the 600 s join timeout
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "got SIGTERM while waiting for node 0's air launch at 127.0.0.1:" in err, err


def test_a_stopped_node_ends_the_group_without_a_restart(air_bin, tmp_path):
    """Node 1's air launch is stopped mid-run: it will not join another attempt, so node 0 ends
    with that as the first failure instead of restarting and waiting out --join-timeout."""
    port = free_port()
    worker = ["--no-python", "sh", "-c", f'touch {tmp_path}/started_$RANK; exec sleep 300']
    common = ["--nnodes", "2", "--master-port", str(port), "--max-restarts", "2",
              "--join-timeout", "600"]
    nodes = [subprocess.Popen([air_bin, "launch", "--node-rank", str(n), *common, *worker],
                              stderr=subprocess.PIPE, text=True) for n in (0, 1)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"started_{r}").exists() for r in (0, 1)):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    nodes[1].send_signal(signal.SIGTERM)
    _, err1 = nodes[1].communicate(timeout=120)
    _, err0 = nodes[0].communicate(timeout=120)  # not the 600 s join timeout of a restart
    assert nodes[1].returncode == 128 + signal.SIGTERM, err1
    assert nodes[0].returncode == 1, err0
    assert "restarting" not in err0, err0
    assert "node 1's air launch on host" in err0 and "got SIGTERM" in err0, err0


def test_a_port_in_use_fails_before_any_worker_starts(air_bin, tmp_path):
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        marker = tmp_path / "started"
        proc = launch(air_bin, "--master-port", port, "--no-python", "touch", marker)
    assert proc.returncode == 1
    assert f"port {port} is in use" in proc.stderr, proc.stderr
    assert not marker.exists()


def test_air_launch_under_air_run(air, air_bin, air_home, tmp_path, venv_path):
    code = tmp_path / "code"
    shutil.copytree(pathlib.Path(__file__).parent / "runtime_jobs" / "allreduce", code)
    out = tmp_path / "out"
    out.mkdir()
    command = (f"{air_bin} launch --nnodes $NUM_NODES --node-rank $NODE_RANK "
               "--nproc-per-node $LOCAL_WORLD_SIZE --master-addr $MASTER_ADDR "
               "--master-port $MASTER_PORT job.py")
    spec = write_spec(tmp_path, command, name="air-launch", nodes=2, per_node=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"JOB_OUT": str(out)})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=240)
    logs = {n: air("logs", run_id, "--node", n, check=True).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    seen = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(4)]
    assert [s["sum"] for s in seen] == [6.0] * 4
    assert sorted((s["group_rank"], s["node_rank"], s["local_rank"]) for s in seen) == [
        (0, 0, 0), (0, 0, 1), (1, 1, 0), (1, 1, 1)]
    assert "rank 2/4 on node 1 saw all_reduce sum 6" in logs[1]
