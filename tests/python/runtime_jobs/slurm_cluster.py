"""The real Slurm cluster of the Slurm tests: scripts/slurm/start.sh starts (idempotently) munged,
slurmctld and 3 slurmd nodes on this machine; the session fixture exports SLURM_CONF for every
air command and stops the cluster at the end (unless it was already running when the session
began: another test session on the machine may be using it). Helpers read Slurm's own view (squeue, scontrol)
to prove what air did."""
import os
import pathlib
import subprocess
import time

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[3]
SLURM_DIR = pathlib.Path(os.environ.get("AIR_SLURM_DIR", "/tmp/air-slurm"))
SCRIPTS = REPO / "scripts" / "slurm"


def start_cluster() -> str:
    proc = subprocess.run([str(SCRIPTS / "start.sh")], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        pytest.fail(f"scripts/slurm/start.sh failed:\n{proc.stdout}\n{proc.stderr}")
    line = [l for l in proc.stdout.splitlines() if l.startswith("export SLURM_CONF=")][-1]
    return line.split("=", 1)[1]


def cluster_up() -> bool:
    """Whether start.sh's cluster already answers (another session may be using it)."""
    env = dict(os.environ, SLURM_CONF=str(SLURM_DIR / "slurm.conf"))
    try:
        proc = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, env=env,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "UP" in proc.stdout


@pytest.fixture(scope="session")
def slurm_cluster():
    was_up = cluster_up()
    conf = start_cluster()
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = conf
    yield conf
    if not was_up:  # a cluster this session found running is left to whoever started it
        subprocess.run([str(SCRIPTS / "stop.sh")], capture_output=True, timeout=120)
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


@pytest.fixture
def slurm_home(slurm_cluster, air_home):
    """AIR_HOME whose config.yaml selects the Slurm backend (the workload YAML is unchanged)."""
    write_config(air_home, {"backend": "slurm", "slurm": {"partition": "debug"}})
    yield air_home
    # Whatever a failed test left: cancel air's jobs, bring every node back.
    jobs = squeue_jobs()
    if jobs:
        subprocess.run(["scancel", *jobs], capture_output=True)
    start_cluster()


def write_config(air_home, config: dict):
    (pathlib.Path(air_home) / "config.yaml").write_text(yaml.safe_dump(config))


def squeue_jobs() -> list:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def job_of(name: str, timeout=30.0) -> dict:
    """`scontrol show job` of the newest job named NAME (air-<run>-<attempt>)."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True,
                             text=True).stdout
        jobs = [parse_record(l) for l in out.splitlines() if f"JobName={name} " in l]
        if jobs:
            return max(jobs, key=lambda j: int(j["JobId"]))
        if time.monotonic() > deadline:
            raise AssertionError(f"no Slurm job named {name}:\n{out}")
        time.sleep(0.1)


def parse_record(line: str) -> dict:
    out = {}
    for field in line.split(" "):
        if "=" in field:
            key, value = field.split("=", 1)
            out[key] = value
    return out


def hostnames(nodelist: str) -> list:
    return subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                          text=True, check=True).stdout.split()


def job_steps_alive(job_id: str) -> list:
    """slurmstepd processes of the job, on any node (their title names the job)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("slurmstepd:") and f"[{job_id}." in cmdline:
            found.append((int(entry), cmdline))
    return found


def assert_not_in_any_argv(value: str):
    """No process's command line holds `value` (secrets never travel in argv)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                assert value.encode() not in f.read(), entry
        except OSError:
            pass


def assert_not_in_slurm_job(job_id: str, value: str):
    """Neither `scontrol show job -d` nor the job's stored batch script holds `value`."""
    shown = subprocess.run(["scontrol", "show", "job", "-d", job_id], capture_output=True,
                           text=True, check=True).stdout
    script = subprocess.run(["scontrol", "write", "batch_script", job_id, "-"],
                            capture_output=True, text=True, check=True).stdout
    assert "srun" in script and value not in script and value not in shown


def assert_not_in_files(roots, value: str):
    """No readable file under `roots` holds `value`."""
    for root in roots:
        for path in pathlib.Path(root).rglob("*"):
            if path.is_file():
                try:
                    assert value.encode() not in path.read_bytes(), path
                except PermissionError:
                    pass
