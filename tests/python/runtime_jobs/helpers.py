"""Helpers for the runtime's end-to-end tests: writing workload files, submitting with the real
`air` binary, waiting for states, and proving that no process of a run is left (by /proc
environ marker and by process group)."""
import json
import os
import pathlib
import random
import shutil
import signal
import socket
import sys
import time

import yaml

TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELED", "INTERNAL_ERROR"}
ALLREDUCE_DIR = pathlib.Path(__file__).parent / "allreduce"
TORCHRUN = ("torchrun --nnodes=$NUM_NODES --node_rank=$NODE_RANK "
            "--nproc_per_node=$LOCAL_WORLD_SIZE --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT job.py")


def write_spec(directory: pathlib.Path, command: str, *, name: str = "run-test",
               nodes: int = 2, per_node: int = 1, filename: str = "workload.yaml",
               **extra) -> pathlib.Path:
    """Writes a workload YAML for `nodes` local CPU nodes and returns its path."""
    spec = {
        "experiment_name": name,
        "compute": {"accelerator_type": f"CPU_{per_node}", "num_accelerators": nodes * per_node},
        "command": command,
        "max_retries": 0,
    }
    spec.update(extra)
    path = directory / filename
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def stage_venv_job(tmp_path, monkeypatch, job_dir):
    """A job that runs on the project venv's torch: the venv's bin (torchrun, python) first on
    PATH, `job_dir` copied to tmp_path/code (the spec's snapshot root). Returns the empty output
    directory tmp_path/out the job writes to (its JOB_OUT)."""
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    assert os.path.exists(os.path.join(venv_bin, "torchrun")), venv_bin
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    shutil.copytree(job_dir, tmp_path / "code")
    out = tmp_path / "out"
    out.mkdir()
    return out


def allreduce_spec(tmp_path, monkeypatch):
    """The torchrun + gloo all-reduce workload (2 nodes x 2 processes) that runs unchanged on
    every backend (test_run_torch.py, test_slurm.py). Returns (spec path, output directory)."""
    out = stage_venv_job(tmp_path, monkeypatch, ALLREDUCE_DIR)
    spec = write_spec(tmp_path, TORCHRUN, name="torch-allreduce", nodes=2, per_node=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"JOB_OUT": str(out), "OMP_NUM_THREADS": "1"})
    return spec, out


def submit(air, spec_path, **kw) -> int:
    """`air run -f SPEC` must print only the numeric run id and return at once."""
    proc = air("run", "-f", spec_path, **kw)
    assert proc.returncode == 0, f"air run failed:\n{proc.stdout}\n{proc.stderr}"
    return int(proc.stdout.strip())


def get(air, run_id) -> dict:
    code, env = air.json("get", run_id)
    assert code == 0, env
    return env["data"]


def wait_for(air, run_id, predicate, timeout=30.0, interval=0.05) -> dict:
    deadline = time.monotonic() + timeout
    run = get(air, run_id)
    while not predicate(run):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; run is now:\n{json.dumps(run, indent=1)}")
        time.sleep(interval)
        run = get(air, run_id)
    return run


def wait_terminal(air, run_id, timeout=60.0) -> dict:
    return wait_for(air, run_id, lambda r: r["state"] in TERMINAL, timeout)


def nodes_running(run: dict, attempt: int = -1) -> bool:
    details = run["attempt_details"]
    if not details:
        return False
    nodes = details[attempt]["nodes"]
    return all(n["state"] == "RUNNING" for n in nodes)


def run_processes(air_home: pathlib.Path, run_id: int) -> list:
    """Live processes of the run: their environment names the run's node directory."""
    marker = f"CODE_SOURCE_PATH={air_home}/runs/{run_id}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state == b"Z":
            continue
        if any(var.startswith(marker) for var in environ.split(b"\0")):
            found.append(int(entry))
    return found


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def assert_no_processes_left(air_home, run: dict, timeout=3.0):
    """Nothing of the run may survive: no process carrying its environment, no node's process
    group, no agent."""
    pgids = [n["pgid"] for a in run["attempt_details"] for n in a["nodes"] if n["pgid"]]
    agents = [n["agent_pid"] for a in run["attempt_details"] for n in a["nodes"]
              if n["agent_pid"]]
    deadline = time.monotonic() + timeout
    while True:
        left = run_processes(air_home, run["run_id"])
        groups = [g for g in pgids if group_alive(g)]
        live_agents = [p for p in agents if os.path.exists(f"/proc/{p}") and
                       not _is_zombie(p)]
        if not left and not groups and not live_agents:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"left behind: processes {left}, groups {groups}, "
                                 f"agents {live_agents}")
        time.sleep(0.05)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def kill_run_processes(air_home, run_id):
    """Test cleanup: never leave a stray process behind even when an assertion failed."""
    for pid in run_processes(air_home, run_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def explain(run: dict, logs: dict) -> str:
    """A run's state, failure summary and node logs as one string: an assertion message that
    pytest prints whole (a dict or tuple message is cut in the middle)."""
    parts = [f"run {run.get('id')} is {run.get('state')}",
             f"failure summary:\n{run.get('failure_summary', '')}"]
    parts += [f"--- node {node} log:\n{text}" for node, text in logs.items()]
    return "\n".join(parts)


def free_port() -> int:
    """A TCP port free on every local address, for MASTER_PORT. Chosen below the kernel's
    ephemeral range (as air's own Env::PickFreePort does): a bind-0 port could be handed to
    another socket's bind(0) or connect() before the rendezvous store binds it."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    candidates = list(range(low - 10000, low)) if low - 10000 >= 1024 else []
    random.shuffle(candidates)
    for port in candidates[:200]:
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # a range too low to leave room: bind-0, as air does
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sigkill_once_complete(cmd, marker: pathlib.Path, timeout=120.0):
    """Starts `cmd` in its own process group, waits until the checkpoint `marker` (its COMPLETE
    file) exists, then SIGKILLs the whole group (a launcher and its ranks, mid-run). Fails the
    test when the command ends first or the marker takes longer than `timeout`; returns the
    command's output."""
    import subprocess
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    return proc.communicate()[0]
