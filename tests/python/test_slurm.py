"""`air run` on a real Slurm cluster (scripts/slurm/start.sh: munged, slurmctld and 3 slurmd
nodes on this machine; runtime_jobs/slurm_cluster.py). The same workload YAML as on the local
backend; AIR_HOME/config.yaml (or --backend slurm) selects Slurm. Every test reads Slurm's own
view (scontrol, squeue, /proc) to prove what air did."""
import json
import os
import pathlib
import subprocess
import time

from runtime_jobs.helpers import allreduce_spec, explain, get, nodes_running, run_processes, submit, wait_for, \
    wait_terminal, write_spec
from runtime_jobs.slurm_cluster import SCRIPTS, SLURM_DIR, assert_not_in_any_argv, \
    assert_not_in_files, assert_not_in_slurm_job, hostnames, job_of, job_steps_alive, \
    slurm_cluster, slurm_home, squeue_jobs, write_config  # noqa: F401 (fixtures)

CANARY = "canary-5d1c7e02-slurm-secret"


def assert_nothing_left(air_home, run_ids, job_ids, timeout=30.0):
    """No job of the runs in squeue, no slurmstepd of their jobs, no process of theirs."""
    deadline = time.monotonic() + timeout
    while True:
        queued = [j for j in squeue_jobs() if j in job_ids]
        steps = [s for j in job_ids for s in job_steps_alive(j)]
        procs = [p for r in run_ids for p in run_processes(air_home, r)]
        if not queued and not steps and not procs:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"left behind: jobs {queued}, steps {steps}, processes {procs}")
        time.sleep(0.2)


def test_torchrun_job_on_two_slurm_nodes_all_reduces(air, slurm_home, tmp_path, monkeypatch):
    spec, out = allreduce_spec(tmp_path, monkeypatch)  # test_run_torch.py's workload
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=240)
    logs = {n: air("logs", run_id, "--node", n, check=True).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    assert run["backend"] == "slurm"
    job = job_of(f"air-{run_id}-0")
    assert job["JobState"] == "COMPLETED" and job["NumNodes"] == "2", job
    hosts = hostnames(job["NodeList"])
    seen = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(4)]
    assert [s["sum"] for s in seen] == [6.0] * 4  # 0 + 1 + 2 + 3
    assert all(s["world_size"] == 4 for s in seen)
    assert sorted((s["group_rank"], s["local_rank"]) for s in seen) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]
    # NODE_RANK = SLURM_NODEID: node n ran on the allocation's n-th host; MASTER_ADDR is the first.
    assert {s["node_rank"]: s["host"] for s in seen} == {0: hosts[0], 1: hosts[1]}
    port = run["attempt_details"][0]["master_port"]
    assert {s["master"] for s in seen} == {f"{hosts[0]}:{port}"}
    assert "rank 2/4 on node 1 saw all_reduce sum 6" in logs[1]
    assert "rank 3/4 on node 1 saw all_reduce sum 6" in logs[1]
    assert "on node 0" not in logs[1]
    assert "rank 0/4 on node 0 saw all_reduce sum 6" in logs[0]


def test_secret_reaches_both_nodes_and_nothing_else(air, slurm_home, tmp_path):
    air("secrets", "create-scope", "s", check=True)
    air("secrets", "put-secret", "s", "hf_token", input=CANARY + "\n", check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    command = (f'echo "token=$HF_TOKEN"; printf "%s" "$HF_TOKEN" > {outside}/node_$NODE_RANK; '
               f'touch {outside}/ready_$NODE_RANK; sleep 3')
    spec = write_spec(tmp_path, command, nodes=2, secrets={"HF_TOKEN": "s/hf_token"})
    run_id = submit(air, spec)
    # While the nodes run: no process's argv holds the value.
    deadline = time.monotonic() + 60
    while not all((outside / f"ready_{n}").exists() for n in (0, 1)):
        assert time.monotonic() < deadline, get(air, run_id)
        time.sleep(0.1)
    assert_not_in_any_argv(CANARY)
    assert_not_in_slurm_job(job_of(f"air-{run_id}-0")["JobId"], CANARY)
    run = wait_terminal(air, run_id, timeout=60)
    assert run["state"] == "SUCCEEDED", run
    for node in (0, 1):
        assert (outside / f"node_{node}").read_text() == CANARY  # the real value, on the node
        logs = air("logs", run_id, "--node", node, check=True).stdout
        assert "token=[REDACTED]" in logs and CANARY not in logs
    # Nowhere at rest: not in air's store, logs or run files (the per-node secrets files are
    # gone), not in Slurm's logs, state or spool.
    leftovers = list(slurm_home.glob("runs/*/attempt_*/node_*.secrets"))
    assert leftovers == []
    assert_not_in_files([slurm_home, SLURM_DIR], CANARY)


def start_then_stop_node_1(air, tmp_path, out, command):
    """Submits COMMAND on 2 nodes with one retry, waits until both touched out/started_<rank>,
    then stops node 1's Slurm host; returns the run id, the first job and that host."""
    spec = write_spec(tmp_path, command, nodes=2, max_retries=1)
    run_id = submit(air, spec)
    deadline = time.monotonic() + 60
    while not all((out / f"started_{n}").exists() for n in (0, 1)):
        assert time.monotonic() < deadline, get(air, run_id)
        time.sleep(0.1)
    first = job_of(f"air-{run_id}-0")
    victim = hostnames(first["NodeList"])[1]
    subprocess.run([str(SCRIPTS / "stop.sh"), victim], check=True, capture_output=True)
    return run_id, first, victim


def test_a_killed_node_fails_the_attempt_naming_it_and_the_retry_succeeds(air, slurm_home,
                                                                           tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    command = (f'if [ "$AIR_ATTEMPT" = 0 ]; then touch {out}/started_$NODE_RANK; sleep 300; '
               f'else echo "attempt $AIR_ATTEMPT node $NODE_RANK on $(hostname)"; fi')
    run_id, first, victim = start_then_stop_node_1(air, tmp_path, out, command)
    killed_at = time.monotonic()
    run = wait_terminal(air, run_id, timeout=120)
    print(f"node {victim} killed: run ended {time.monotonic() - killed_at:.1f} s later")
    # String messages: pytest prints them whole (a dict message is cut in the middle).
    details = json.dumps(run, indent=1)
    assert run["state"] == "SUCCEEDED", details
    failed, retried = run["attempt_details"]
    assert failed["state"] == "FAILED", details
    assert f"Slurm node {victim} failed" in failed["failure_summary"], details
    assert "node 1" in failed["failure_summary"], details
    assert job_of(f"air-{run_id}-0")["JobState"] == "NODE_FAIL", job_of(f"air-{run_id}-0")
    assert retried["state"] == "SUCCEEDED", details
    second = job_of(f"air-{run_id}-1")
    assert victim not in hostnames(second["NodeList"]), (victim, second)
    assert "attempt 1 node 1 on" in air("logs", run_id, "--node", 1, "--retry", 1).stdout
    assert_nothing_left(slurm_home, [run_id], [first["JobId"], second["JobId"]])


def test_a_node_whose_command_dies_of_sigterm_first_does_not_hide_the_failed_node(
        air, slurm_home, tmp_path):
    """Slurm signals every process of a failed job's step: node 0's command may die of SIGTERM
    before its agent reads its own, so its report says only 'killed by signal 15'. That report
    waits for the job's state, and the failure names the dead node, not node 0. Here node 0's
    command sends itself the SIGTERM as soon as the other node's host is stopped (long before
    Slurm notices), the order the race can take."""
    out = tmp_path / "out"
    out.mkdir()
    command = (f'if [ "$AIR_ATTEMPT" = 0 ]; then touch {out}/started_$NODE_RANK; '
               f'if [ "$NODE_RANK" = 0 ]; then while [ ! -e {out}/go ]; do sleep 0.1; done; '
               f'kill -TERM $$; fi; sleep 300; else echo "attempt $AIR_ATTEMPT"; fi')
    run_id, _, victim = start_then_stop_node_1(air, tmp_path, out, command)
    (out / "go").touch()
    run = wait_terminal(air, run_id, timeout=150)
    details = json.dumps(run, indent=1)
    assert run["state"] == "SUCCEEDED", details
    failed, retried = run["attempt_details"]
    assert failed["nodes"][0]["signal"] == 15, details  # node 0 did die of its SIGTERM first
    assert f"Slurm node {victim} failed" in failed["failure_summary"], details
    assert "node 1" in failed["failure_summary"], details
    assert retried["state"] == "SUCCEEDED", details


def test_timeout_minutes_ends_a_hanging_job_timed_out(air, slurm_home, tmp_path):
    # Slurm's limits are whole minutes, checked about every 30 s: this ends 60-90 s in.
    spec = write_spec(tmp_path, "sleep 300", nodes=2, timeout_minutes=1)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    assert run["state"] == "TIMED_OUT", run
    job = job_of(f"air-{run_id}-0")
    assert job["JobState"] == "TIMEOUT" and job["TimeLimit"] == "00:01:00", job
    assert "timeout_minutes: 1" in run["failure_summary"], run
    assert_nothing_left(slurm_home, [run_id], [job["JobId"]])


def test_queued_run_shows_the_reason_and_cancel_leaves_nothing(air, slurm_home, tmp_path):
    big = write_spec(tmp_path, "sleep 300", nodes=3, per_node=2, filename="big.yaml")
    small = write_spec(tmp_path, "sleep 300", nodes=2, per_node=2, filename="small.yaml")
    # --backend slurm selects the backend just as config.yaml does.
    write_config(slurm_home, {"slurm": {"partition": "debug"}})
    proc = air("run", "-f", big, "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    a = int(proc.stdout)
    wait_for(air, a, nodes_running, timeout=60)
    proc = air("run", "-f", small, "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    b = int(proc.stdout)
    queued = wait_for(air, b, lambda r: r.get("queue_reason") == "Resources", timeout=30)
    assert queued["state"] == "PENDING", queued
    assert "PENDING (queued: Resources)" in air("get", b, check=True).stdout
    # `air list` agrees with `air get`: the queued run is PENDING with its reason, not RUNNING.
    listed = air("list", check=True).stdout
    rows = {line.split()[0]: line for line in listed.splitlines()[1:]}
    assert "PENDING (Resources)" in rows[str(b)] and "RUNNING" in rows[str(a)], listed
    code, envelope = air.json("list")
    assert code == 0, envelope
    shown = {r["run_id"]: (r["state"], r.get("queue_reason")) for r in envelope["data"]["runs"]}
    assert shown[b] == ("PENDING", "Resources") and shown[a] == ("RUNNING", None), shown
    code, envelope = air.json("list", "--filter", "state=PENDING")
    assert [r["run_id"] for r in envelope["data"]["runs"]] == [b], envelope
    jobs = [job_of(f"air-{a}-0")["JobId"], job_of(f"air-{b}-0")["JobId"]]
    air("cancel", b, check=True)
    air("cancel", a, check=True)
    for run_id in (a, b):
        assert wait_terminal(air, run_id, timeout=60)["state"] == "CANCELED"
    assert_nothing_left(slurm_home, [a, b], jobs)
    assert job_of(f"air-{a}-0")["JobState"] == "CANCELLED"


def test_bad_input_is_refused_before_anything_is_submitted(air, slurm_home, tmp_path):
    before = squeue_jobs()

    def refused(spec, *words, env=None):
        proc = air("run", "-f", spec, env=env)
        assert proc.returncode in (1, 2), proc.stdout
        for word in words:
            assert word in proc.stderr, proc.stderr
        assert not (slurm_home / "air.db").exists()
        assert squeue_jobs() == before
        return proc.stderr

    # A job bigger than the cluster fails at once (the partition's node count is fixed).
    refused(write_spec(tmp_path, "true", nodes=4, filename="big.yaml"),
            "4 nodes requested; the slurm (partition debug) backend runs at most 3")
    refused(write_spec(tmp_path, "true", nodes=1, per_node=4, filename="cpu.yaml"),
            "CPU_4 needs 4 CPUs on each node", "at most 2")
    gpu = tmp_path / "gpu.yaml"
    gpu.write_text("experiment_name: g\ncompute: {accelerator_type: GPU_8xH100, "
                   "num_accelerators: 8}\ncommand: 'true'\n")
    refused(gpu, "GPU_8xH100 needs 8 GPU(s) on each node", "at most 0")
    ok = write_spec(tmp_path, "true", nodes=2, filename="ok.yaml")
    write_config(slurm_home, {"backend": "slurm", "slurm": {"partition": "gpu"}})
    refused(ok, "slurm.partition: 'gpu' is not a partition of this cluster; valid: debug")
    write_config(slurm_home, {"backend": "slurm", "shared_root": "/proc/air-shared"})
    refused(ok, "shared_root '/proc/air-shared' is not writable")
    write_config(slurm_home, {"backend": "slurm"})
    no_slurm = dict(os.environ, PATH="/nonexistent")
    refused(ok, "needs the Slurm command `sbatch`", "apt-get install slurm-client", env=no_slurm)
    conf = tmp_path / "slurm.conf"
    conf.write_text(pathlib.Path(os.environ["SLURM_CONF"]).read_text().replace(
        "SlurmctldPort=6817", "SlurmctldPort=6899"))
    unreachable = dict(os.environ, SLURM_CONF=str(conf))
    refused(ok, "cannot reach the Slurm controller", str(conf), env=unreachable)
