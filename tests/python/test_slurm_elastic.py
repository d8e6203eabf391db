"""air train on a real Slurm cluster (scripts/slurm/start.sh), resumed from its checkpoints:

- elastic (compute.min_nodes: 1): a node of the 2-node job is set DOWN after checkpoint-10;
  Slurm ends the job NODE_FAIL, attempt 1 runs on 1 node with the lost host excluded (sbatch
  --exclude), resumes (resharded from 2 ranks to 1) and SUCCEEDS, the remaining steps matching
  a 2-rank run never stopped;
- HYBRID_SHARD across 2 Slurm nodes x 2 ranks: a rank SIGKILLed after checkpoint-6 fails
  attempt 0; attempt 1, again on 2 nodes, resumes and its steps are the ones of the same
  4-rank HYBRID_SHARD run never stopped (2 local nodes x 2 ranks)."""
import os
import pathlib
import signal
import subprocess
import time

import yaml

from runtime_jobs.helpers import explain, free_port, run_processes, submit, wait_terminal, \
    write_spec
from runtime_jobs.slurm_cluster import hostnames, job_of, slurm_cluster, slurm_home  # noqa: F401
from test_train_resume import metrics, tiny  # noqa: F401 (the model and data fixture)
from test_train_resume import params as resume_params

STEPS = 24


# The global batch (4 rows) whatever the number of ranks: the accumulation is derived from them,
# so a retry on fewer ranks resumes the same steps (a checkpoint refuses another global batch).
KEEP_GLOBAL_BATCH = {"global_batch_size": 4}


def params(tiny, out, world, **extra):
    """test_train_resume.py's run, shorter, with a checkpoint every 2 steps."""
    return resume_params(tiny, out, world, **dict({"max_steps": STEPS, "save_steps": 2}, **extra))


def losses(out, first_step):
    return {m["step"]: m["loss"] for m in metrics(out) if m["step"] >= first_step}


def launch_command(air_bin, per_node):
    return (f'echo "attempt $AIR_ATTEMPT: NUM_NODES=$NUM_NODES WORLD_SIZE=$WORLD_SIZE on '
            f'$(hostname)"; exec {air_bin} launch --nnodes $NUM_NODES --node-rank $NODE_RANK '
            f"--nproc-per-node {per_node} --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
            f"--no-python {air_bin} train --threads 1")


def wait_file(path, run_id, air, timeout=240):
    deadline = time.monotonic() + timeout
    while not path.exists():
        code, env = air.json("get", run_id)
        assert time.monotonic() < deadline and env["data"]["state"] in ("PENDING", "RUNNING"), \
            explain(env["data"], {})
        time.sleep(0.02)


def resumed_step(logs):
    lines = [l for l in logs.splitlines() if "resumed from" in l]
    assert lines, logs
    return int(lines[0].split("(step ")[1].split(")")[0])


def straight_run(air_bin, tiny, out, nodes, per_node, **extra):
    """The same training never stopped: `air launch` on `nodes` local nodes."""
    cfg = out.parent / "straight.yaml"
    cfg.write_text(yaml.safe_dump(params(tiny, out, nodes * per_node, **extra)))
    port = free_port()
    procs = [subprocess.Popen([air_bin, "launch", "--nnodes", str(nodes), "--node-rank", str(r),
                               "--nproc-per-node", str(per_node), "--master-port", str(port),
                               "--no-python", air_bin, "train", "--config", str(cfg),
                               "--threads", "1"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for r in range(nodes)]
    for p in procs:
        text = p.communicate(timeout=600)[0]
        assert p.returncode == 0, text


def test_elastic_retry_on_slurm_excludes_the_down_node_and_resumes(air, air_bin, slurm_home,
                                                                   tiny, tmp_path):
    out = tmp_path / "out"
    # Long enough for the node to go DOWN mid-run (the tiny model trains a step in ~0.1 s).
    long = {"max_steps": 5 * STEPS, "save_steps": 10}
    spec = write_spec(tmp_path, launch_command(air_bin, 1), name="slurm-elastic", nodes=2,
                      per_node=1, max_retries=1,
                      parameters=params(tiny, out, 2, resume_from_checkpoint="latest", **long,
                                        **KEEP_GLOBAL_BATCH))
    spec.write_text(spec.read_text().replace("  num_accelerators: 2\n",
                                             "  num_accelerators: 2\n  min_nodes: 1\n"))
    run_id = submit(air, spec)
    wait_file(out / "checkpoint-10" / "COMPLETE", run_id, air)
    first = job_of(f"air-{run_id}-0")
    victim = hostnames(first["NodeList"])[1]
    subprocess.run(["scontrol", "update", f"NodeName={victim}", "State=DOWN",
                    "Reason=air-elastic-test"], check=True)
    try:
        run = wait_terminal(air, run_id, timeout=600)
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={victim}", "State=RESUME"],
                       capture_output=True)
    logs = air("logs", run_id, "--node", 0, "--retry", 1).stdout
    assert run["state"] == "SUCCEEDED", explain(run, {0: logs})
    failed, retried = run["attempt_details"]
    assert failed["state"] == "FAILED" and failed["num_nodes"] == 2, failed
    assert f"Slurm node {victim} failed" in failed["failure_summary"], failed
    assert job_of(f"air-{run_id}-0")["JobState"] == "NODE_FAIL"
    assert retried["num_nodes"] == 1 and retried["world_size"] == 1, retried
    second = job_of(f"air-{run_id}-1")
    assert second["NumNodes"] == "1" and victim not in hostnames(second["NodeList"]), second
    assert victim in second.get("ExcNodeList", ""), second  # excluded by air, not by chance
    assert "attempt 1: NUM_NODES=1 WORLD_SIZE=1" in logs, logs
    step = resumed_step(logs)
    assert step >= 10, logs
    straight = tmp_path / "straight" / "out"
    straight.parent.mkdir()
    straight_run(air_bin, tiny, straight, 1, 2, **long)
    ours, ref = losses(out, step + 1), losses(straight, step + 1)
    assert sorted(ours) == list(range(step + 1, 5 * STEPS + 1)), ours
    assert max(abs(ours[s] - ref[s]) / abs(ref[s]) for s in ours) <= 1e-4, (ours, ref)
    assert run_processes(slurm_home, run_id) == []


def test_hybrid_shard_resumes_across_two_slurm_nodes(air, air_bin, slurm_home, tiny, tmp_path):
    out = tmp_path / "out"
    hybrid = {"fsdp_sharding_strategy": "HYBRID_SHARD"}
    spec = write_spec(tmp_path, launch_command(air_bin, 2), name="slurm-hybrid", nodes=2,
                      per_node=2, max_retries=1,
                      parameters=params(tiny, out, 4, resume_from_checkpoint="latest", **hybrid,
                                        **KEEP_GLOBAL_BATCH))
    run_id = submit(air, spec)
    wait_file(out / "checkpoint-6" / "COMPLETE", run_id, air)
    victims = [pid for pid in run_processes(slurm_home, run_id)
               if b"train" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
               and b"launch" not in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert victims, "no air train process found"
    os.kill(victims[-1], signal.SIGKILL)
    run = wait_terminal(air, run_id, timeout=600)
    logs = air("logs", run_id, "--node", 0, "--retry", 1).stdout
    assert run["state"] == "SUCCEEDED", explain(run, {0: logs})
    assert [a["num_nodes"] for a in run["attempt_details"]] == [2, 2], run
    assert "attempt 1: NUM_NODES=2 WORLD_SIZE=4" in logs, logs
    assert "HYBRID_SHARD" in logs, logs
    step = resumed_step(logs)
    assert step >= 6, logs
    straight = tmp_path / "straight" / "out"
    straight.parent.mkdir()
    straight_run(air_bin, tiny, straight, 2, 2, **hybrid)
    ours, ref = losses(out, step + 1), losses(straight, step + 1)
    assert sorted(ours) == list(range(step + 1, STEPS + 1)), ours
    assert all(ours[s] == ref[s] for s in ours), (ours, ref)
    assert run_processes(slurm_home, run_id) == []
