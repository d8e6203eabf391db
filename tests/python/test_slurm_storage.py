"""Storage on the Slurm backend (docs/slurm.md, docs/volumes.md), against the real daemons of
scripts/slurm/start.sh: `/Volumes/<catalog>/<schema>/<volume>/...` on every Slurm node is the
configured volume root (default <shared_root>/volumes), shown through the same private mount
namespace the local backend's agent enters, and `air volumes` on the submit host reads the same
root; an unusable volume root is refused before anything is submitted."""
import os
import subprocess

from runtime_jobs.helpers import explain, submit, wait_terminal, write_spec
from runtime_jobs.slurm_cluster import SLURM_DIR, hostnames, job_of, slurm_cluster, slurm_home, \
    squeue_jobs, write_config  # noqa: F401 (fixtures)

OUTPUT_DIR = "/Volumes/main/default/air_checkpoints/llama31-8b-sft"
# The seed's pattern: the script reads output_dir from its parameters file and saves there.
SAVE = ('OUT=$(sed -n "s/^output_dir: *//p" "$HYPERPARAMETERS_PATH"); '
        'mkdir -p "$OUT/checkpoint-1" && '
        'echo "node $NODE_RANK on $(hostname)" > "$OUT/checkpoint-1/node_$NODE_RANK.txt" && '
        'echo "saved to $OUT mounts=$(grep -c " /Volumes " /proc/self/mountinfo)"')


def test_two_slurm_nodes_write_a_volume_that_air_volumes_lists(air, slurm_home, tmp_path):
    shared = tmp_path / "shared"
    write_config(slurm_home, {"backend": "slurm", "shared_root": str(shared),
                              "slurm": {"partition": "debug"}})
    host_before = sorted(os.listdir("/Volumes")) if os.path.isdir("/Volumes") else None
    spec = write_spec(tmp_path, SAVE, nodes=2, parameters={"output_dir": OUTPUT_DIR})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    hosts = hostnames(job_of(f"air-{run_id}-0")["NodeList"])
    assert len(set(hosts)) == 2
    for n in (0, 1):
        assert f"saved to {OUTPUT_DIR} mounts=1" in logs[n], logs[n]
    # The files are under <shared_root>/volumes, written by each Slurm node.
    volume = shared / "volumes" / "main" / "default" / "air_checkpoints" / "llama31-8b-sft"
    for n in (0, 1):
        text = (volume / "checkpoint-1" / f"node_{n}.txt").read_text()
        assert text == f"node {n} on {hosts[n]}\n", text
    code, listing = air.json("volumes", "ls", "-r", OUTPUT_DIR)
    assert code == 0, listing
    assert listing["data"]["root"] == str(shared / "volumes"), listing
    assert sorted(e["path"] for e in listing["data"]["entries"] if e["type"] == "file") == [
        f"{OUTPUT_DIR}/checkpoint-1/node_0.txt", f"{OUTPUT_DIR}/checkpoint-1/node_1.txt"]
    # Back out with cp, then rm: the host's view is the nodes' view.
    air("volumes", "cp", f"{OUTPUT_DIR}/checkpoint-1/node_1.txt", tmp_path / "n1.txt", check=True)
    assert (tmp_path / "n1.txt").read_text() == f"node 1 on {hosts[1]}\n"
    air("volumes", "rm", "-r", f"{OUTPUT_DIR}/checkpoint-1", check=True)
    assert not (volume / "checkpoint-1").exists()
    # Nothing reached the host's own /Volumes.
    assert (sorted(os.listdir("/Volumes")) if os.path.isdir("/Volumes") else None) in (
        host_before, [])

    # volumes_root in config.yaml moves the root for the nodes and for `air volumes` alike.
    other = tmp_path / "other_volumes"
    write_config(slurm_home, {"backend": "slurm", "shared_root": str(shared),
                              "volumes_root": str(other), "slurm": {"partition": "debug"}})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    assert run["state"] == "SUCCEEDED", run
    moved = other / "main" / "default" / "air_checkpoints" / "llama31-8b-sft" / "checkpoint-1"
    assert sorted(p.name for p in moved.iterdir()) == ["node_0.txt", "node_1.txt"]
    code, listing = air.json("volumes", "ls", f"{OUTPUT_DIR}/checkpoint-1")
    assert code == 0 and listing["data"]["root"] == str(other), listing
    assert [e["name"] for e in listing["data"]["entries"]] == ["node_0.txt", "node_1.txt"]


def test_an_unusable_volume_root_is_refused_before_submit(air, slurm_home, tmp_path):
    before = squeue_jobs()
    spec = write_spec(tmp_path, SAVE, nodes=2, parameters={"output_dir": OUTPUT_DIR})
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    write_config(slurm_home, {"backend": "slurm", "volumes_root": str(blocker / "volumes"),
                              "slurm": {"partition": "debug"}})
    code, out = air.json("run", "-f", spec)
    assert code == 1, out
    error = out["error"]["message"]
    assert f"the volume root {blocker}/volumes cannot be created" in error, error
    assert "parameters" in error and OUTPUT_DIR in error and "volumes_root" in error, error
    assert squeue_jobs() == before and not (slurm_home / "air.db").exists()
    write_config(slurm_home, {"backend": "slurm", "volumes_root": "vols"})
    proc = air("run", "-f", spec)
    assert proc.returncode == 2, proc.stderr
    assert "config.yaml:2: volumes_root: 'vols' is not an absolute path" in proc.stderr, \
        proc.stderr
    assert squeue_jobs() == before and not (slurm_home / "air.db").exists()


def node_namespace_pid(node: str) -> int:
    """PID (on the host) of the shell that is PID 1 of a node's namespaces (start.sh)."""
    mode = (SLURM_DIR / "ns_mode").read_text().strip()
    assert mode == "1", f"the cluster runs without per-node namespaces (ns_mode {mode})"
    upid = int((SLURM_DIR / "pids" / f"{node}.pid").read_text().split()[0])
    with open(f"/proc/{upid}/task/{upid}/children") as f:
        return int(f.read().split()[0])


def test_a_node_that_cannot_write_the_shared_root_fails_the_run_naming_it(air, slurm_home,
                                                                          tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    write_config(slurm_home, {"backend": "slurm", "shared_root": str(shared),
                              "slurm": {"partition": "debug"}})
    # On node2 only, the shared root is read-only (a bind mount inside its mount namespace).
    enter = ["nsenter", "-t", str(node_namespace_pid("node2")), "-m", "--"]
    subprocess.run(enter + ["sh", "-c", f"mount --bind {shared} {shared} && "
                                        f"mount -o remount,bind,ro {shared}"], check=True)
    try:
        run_id = submit(air, write_spec(tmp_path, "sleep 300", nodes=3))
        run = wait_terminal(air, run_id, timeout=120)
    finally:
        subprocess.run(enter + ["umount", str(shared)], check=True)
    assert run["state"] == "FAILED", run
    summary = run["failure_summary"]
    attempt_dir = shared / "runs" / str(run_id) / "attempt_0"
    assert "node 1 (node2) cannot write the shared root" in summary, summary
    assert f"{attempt_dir}: Read-only file system" in summary, summary
    job = job_of(f"air-{run_id}-0")
    assert job["JobState"] in ("CANCELLED", "FAILED") and job["JobId"] not in squeue_jobs(), job
