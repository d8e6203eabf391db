"""A supervisor that dies does not lose a Slurm run (docs/slurm.md, runtime/reconcile.h): the
job lives on in Slurm's queue or on its nodes, and the next air command that reconciles starts a
new supervisor that adopts the job (not INTERNAL_ERROR, not resubmitted); the run then ends with
the job's real state. Real processes: the supervisors are SIGKILLed, the daemons are
scripts/slurm/start.sh's."""
import os
import signal
import subprocess
import time

from runtime_jobs.helpers import get, nodes_running, run_processes, submit, wait_for, \
    wait_terminal, write_spec
from runtime_jobs.slurm_cluster import job_of, slurm_cluster, slurm_home, squeue_jobs  # noqa: F401

# Each node says it started, then waits for the test's go.
WAIT_FOR_GO = ('touch {out}/started_${{AIR_RUN_ID}}_$NODE_RANK; '
               'while [ ! -e {out}/go ]; do sleep 0.2; done; ')


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def kill_supervisor(air, run_id) -> int:
    pid = get(air, run_id)["supervisor_pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline, pid
        time.sleep(0.05)
    return pid


def test_a_restarted_supervisor_adopts_a_running_and_a_queued_job(air, slurm_home, tmp_path):
    (tmp_path / "out").mkdir()
    command = WAIT_FOR_GO.format(out=tmp_path / "out") + \
        'echo "run $AIR_RUN_ID node $NODE_RANK done on $(hostname)"'
    out = tmp_path / "out"
    big = write_spec(tmp_path, command, nodes=3, per_node=2, filename="big.yaml")
    small = write_spec(tmp_path, command, nodes=2, per_node=2, filename="small.yaml")
    a = submit(air, big)
    wait_for(air, a, nodes_running, timeout=60)
    b = submit(air, small)
    wait_for(air, b, lambda r: r.get("queue_reason") == "Resources", timeout=30)
    jobs = {r: job_of(f"air-{r}-0")["JobId"] for r in (a, b)}
    dead = {r: kill_supervisor(air, r) for r in (a, b)}

    # Any command that reconciles adopts both: A still RUNNING, B still queued.
    listed = air("list", check=True).stdout
    rows = {line.split()[0]: line for line in listed.splitlines()[1:]}
    assert "RUNNING" in rows[str(a)] and "PENDING (Resources)" in rows[str(b)], listed
    for r in (a, b):
        run = get(air, r)
        assert run["state"] in ("RUNNING", "PENDING"), run
        pid = run["supervisor_pid"]
        assert pid != dead[r] and alive(pid), run
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        assert b"--adopt-from" in cmdline and str(dead[r]).encode() in cmdline, cmdline
    assert get(air, b)["queue_reason"] == "Resources"
    assert set(jobs.values()) <= set(squeue_jobs())  # nothing cancelled

    (out / "go").touch()
    for r, nodes in ((a, 3), (b, 2)):
        run = wait_terminal(air, r, timeout=120)
        assert run["state"] == "SUCCEEDED", run
        assert run["attempts"] == 1 and run["attempt_details"][0]["state"] == "SUCCEEDED", run
        assert [n["state"] for n in run["attempt_details"][0]["nodes"]] == ["EXITED"] * nodes
        job = job_of(f"air-{r}-0")
        assert job["JobId"] == jobs[r] and job["JobState"] == "COMPLETED", job
        logs = air("logs", r, "--node", nodes - 1, check=True).stdout
        assert f"run {r} node {nodes - 1} done on node" in logs, logs
    assert not set(jobs.values()) & set(squeue_jobs())


def test_an_adopted_job_ends_with_its_real_state(air, slurm_home, tmp_path):
    """The supervisor dies; the job fails on a node while no supervisor watches; the adopter
    reads how it ended: FAILED naming the node and its exit code, not INTERNAL_ERROR."""
    (tmp_path / "out").mkdir()
    command = WAIT_FOR_GO.format(out=tmp_path / "out") + \
        'if [ "$NODE_RANK" = 1 ]; then echo "node 1 fails"; exit 7; fi; sleep 300'
    out = tmp_path / "out"
    run_id = submit(air, write_spec(tmp_path, command, nodes=2))
    wait_for(air, run_id, nodes_running, timeout=60)
    kill_supervisor(air, run_id)
    (out / "go").touch()
    run = wait_terminal(air, run_id, timeout=120)  # `air get` reconciles: the adopter ends it
    assert run["state"] == "FAILED", run
    assert "node 1" in run["failure_summary"] and "exited with code 7" in run["failure_summary"], run
    assert job_of(f"air-{run_id}-0")["JobId"] not in squeue_jobs()


def test_air_cancel_of_an_adopted_run_cancels_its_job_and_leaves_nothing(air, slurm_home,
                                                                         tmp_path):
    """`air cancel` reaches the adopting supervisor like the first one: the run ends CANCELED,
    its Slurm job is cancelled (not left running under nobody) and no node process is left."""
    (tmp_path / "out").mkdir()
    command = WAIT_FOR_GO.format(out=tmp_path / "out") + "sleep 300"
    run_id = submit(air, write_spec(tmp_path, command, nodes=2))
    wait_for(air, run_id, nodes_running, timeout=60)
    job = job_of(f"air-{run_id}-0")["JobId"]
    dead = kill_supervisor(air, run_id)
    adopter = get(air, run_id)["supervisor_pid"]  # this `air get` starts the adopter
    assert adopter != dead and alive(adopter)
    cancelled = air("cancel", run_id, "-o", "json")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    run = wait_terminal(air, run_id, timeout=60)
    assert run["state"] == "CANCELED", run
    assert run["attempt_details"][0]["state"] == "CANCELED", run
    assert job not in squeue_jobs()
    assert job_of(f"air-{run_id}-0")["JobState"] == "CANCELLED", job_of(f"air-{run_id}-0")
    deadline = time.monotonic() + 30
    while alive(adopter):
        assert time.monotonic() < deadline, "the adopting supervisor did not exit"
        time.sleep(0.1)
    assert run_processes(slurm_home, run_id) == []


def test_a_job_slurm_no_longer_knows_is_named_not_waited_for(air, slurm_home, tmp_path):
    """A dead supervisor's job that Slurm has forgotten (an ended job is purged after
    slurm.conf's MinJobAge; here the attempt names a job id Slurm never had, which Slurm answers
    the same way): the next `air get` ends the run at once, naming the job and why, instead of
    adopting or waiting for it."""
    (tmp_path / "out").mkdir()
    command = WAIT_FOR_GO.format(out=tmp_path / "out") + "sleep 300"
    run_id = submit(air, write_spec(tmp_path, command, nodes=2))
    wait_for(air, run_id, nodes_running, timeout=60)
    job = job_of(f"air-{run_id}-0")["JobId"]
    kill_supervisor(air, run_id)
    subprocess.run(["scancel", job], check=True)
    wait_gone = time.monotonic() + 30
    while job in squeue_jobs():
        assert time.monotonic() < wait_gone
        time.sleep(0.2)
    job_file = slurm_home / "runs" / str(run_id) / "attempt_0" / "slurm_job_id"
    assert job_file.read_text().strip() == job
    purged = str(int(job) + 100000)
    job_file.write_text(purged + "\n")
    run = get(air, run_id)  # one reconcile: no adopter, no wait
    assert run["state"] == "INTERNAL_ERROR", run
    summary = run["failure_summary"]
    assert f"Slurm job {purged}" in summary and "no longer known to Slurm" in summary, summary
    assert "MinJobAge" in summary, summary
    assert run["attempt_details"][0]["ended_us"] is not None, run
    assert run_processes(slurm_home, run_id) == []
