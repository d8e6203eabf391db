"""Resumable training (engine/train/sharded_checkpoint.h): every rank's parameter and AdamW
shards, the step and the data position, committed with a marker last.

- 2 ranks SIGKILLed after checkpoint-10, then `resume_from_checkpoint: latest` -> the losses of
  the remaining steps and the final weights are identical to a run that was never stopped;
- a 4-rank checkpoint resumes on 2 ranks and on 1 process (resharded) within 1e-5;
- a torn checkpoint (no marker, a truncated shard) is skipped for the previous complete one; a
  corrupt shard is an error naming the file; another model or another global batch is refused;
- SIGTERM: every rank finishes its step, writes checkpoint-N and exits non-zero; resuming
  continues from N;
- under `air run` with max_retries: 1, a rank killed mid-run fails attempt 1 and attempt 2
  resumes from the last checkpoint and SUCCEEDS.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

import torch  # a missing reference fails, never skips
from safetensors.torch import load_file

sys.path.insert(0, str(pathlib.Path(__file__).parent / "runtime_jobs"))
from helpers import (explain, free_port, run_processes, sigkill_once_complete,  # noqa: E402
                     submit, wait_terminal, write_spec)
from test_train_cli import make_model, write_pretokenized  # noqa: E402
from tracking_helpers import http, run_mlflow, server_token  # noqa: E402

STEPS = 40


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    make_model(root / "tiny")
    write_pretokenized(root / "data.jsonl", n=64)
    return root / "tiny", root / "data.jsonl"


def params(tiny, out, world, **extra):
    model_dir, data = tiny
    p = {"model_name": str(model_dir), "dataset_name": str(data), "output_dir": str(out),
         "max_seq_len": 64, "per_device_batch_size": 4 // world, "learning_rate": 3e-3,
         "max_steps": STEPS, "save_steps": 10, "logging_steps": 1, "warmup_steps": 3,
         "weight_decay": 0.01, "seed": 5}
    p.update(extra)
    return p


def write(path, p):
    path.write_text(yaml.safe_dump(p))
    return path


def launch_cmd(air_bin, cfg, nproc):
    return [air_bin, "launch", "--standalone", "--nproc-per-node", str(nproc), "--master-port",
            str(free_port()), "--no-python", air_bin, "train", "--config", str(cfg), "--threads",
            "1"]


def train(air_bin, cfg, nproc, check=True):
    cmd = launch_cmd(air_bin, cfg, nproc) if nproc > 1 else [
        air_bin, "train", "--config", str(cfg), "--threads", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def metrics(out):
    return [json.loads(l) for l in (pathlib.Path(out) / "metrics.jsonl").read_text().splitlines()]


def losses_from(out, first_step):
    return [m["loss"] for m in metrics(out) if m["step"] >= first_step]


@pytest.fixture(scope="module")
def straight(tiny, air_bin, tmp_path_factory):
    """2 ranks, FULL_SHARD, never stopped."""
    out = tmp_path_factory.mktemp("straight") / "out"
    train(air_bin, write(out.parent / "p.yaml", params(tiny, out, 2)), 2)
    return out


@pytest.fixture(scope="module")
def straight4(tiny, air_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight4") / "out"
    train(air_bin, write(out.parent / "p.yaml", params(tiny, out, 4)), 4)
    return out


def test_sigkill_then_resume_is_identical(tiny, straight, air_bin, tmp_path):
    out = tmp_path / "out"
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, resume_from_checkpoint="latest"))
    # The launcher and both ranks, SIGKILLed mid-run.
    sigkill_once_complete(launch_cmd(air_bin, cfg, 2), out / "checkpoint-10" / "COMPLETE")
    done = max(m["step"] for m in metrics(out))
    assert not (out / "model.safetensors").exists() and done < STEPS, "killed too late"
    print(f"killed after step {done}; checkpoint-10 is the newest complete one")
    second = train(air_bin, cfg, 2)
    assert "resumed from" in second.stdout and "checkpoint-10 (step 10)" in second.stdout
    assert [m["step"] for m in metrics(out)] == list(range(1, STEPS + 1))
    assert losses_from(out, 11) == losses_from(straight, 11)  # bit for bit
    assert (out / "model.safetensors").read_bytes() == (straight / "model.safetensors").read_bytes()


@pytest.mark.parametrize("world", [2, 1])
def test_resume_on_another_world_size(world, tiny, straight4, air_bin, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    shutil.copytree(straight4 / "checkpoint-10", out / "checkpoint-10")
    cfg = write(tmp_path / "p.yaml", params(tiny, out, world, resume_from_checkpoint=str(
        out / "checkpoint-10")))
    train(air_bin, cfg, world)
    a, b = losses_from(out, 11), losses_from(straight4, 11)
    diff = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    wa, wb = load_file(str(out / "model.safetensors")), load_file(str(straight4 / "model.safetensors"))
    wdiff = max(float((wa[k] - wb[k]).abs().max() / wb[k].abs().max()) for k in wa)
    print(f"4-rank checkpoint resumed on {world}: loss diff {diff:.3g}, weight diff {wdiff:.3g}")
    assert len(a) == STEPS - 10 and diff <= 1e-5 and wdiff <= 1e-5


def test_global_batch_size_resumes_the_same_steps_split_anew(tiny, straight4, air_bin, tmp_path):
    """4 ranks x 1 row checkpointed; 2 ranks x 1 row x 2 micro-batches resume it (the
    accumulation derived from global_batch_size): the same rows in the same steps."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copytree(straight4 / "checkpoint-10", out / "checkpoint-10")
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, per_device_batch_size=1,
                                            global_batch_size=4, resume_from_checkpoint="latest"))
    proc = train(air_bin, cfg, 2)
    assert "x 2 micro-batches (4 sequences a step)" in proc.stdout, proc.stdout
    assert "checkpoint-10 (step 10)" in proc.stdout
    a, b = losses_from(out, 11), losses_from(straight4, 11)
    diff = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    wa, wb = load_file(str(out / "model.safetensors")), load_file(str(straight4 / "model.safetensors"))
    wdiff = max(float((wa[k] - wb[k]).abs().max() / wb[k].abs().max()) for k in wa)
    print(f"4 ranks x 1 resumed as 2 ranks x 1 x 2 micro-batches: loss diff {diff:.3g}, "
          f"weight diff {wdiff:.3g}")
    assert len(a) == STEPS - 10 and diff <= 1e-5 and wdiff <= 1e-5
    # 3 ranks cannot split 4 rows: the error says what would.
    cfg = write(tmp_path / "q.yaml", params(tiny, tmp_path / "q", 3, per_device_batch_size=1,
                                            global_batch_size=4))
    proc = train(air_bin, cfg, 3, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert ("global_batch_size: 4 sequences cannot be split over 3 ranks of per_device_batch_size "
            "1 (3 sequences a micro-batch): valid are multiples of 3 (3 or 6)") in text, text


def test_torn_checkpoint_is_skipped_and_corrupt_one_named(tiny, straight, air_bin, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(straight, out)
    for n in (30, 40):
        shutil.rmtree(out / f"checkpoint-{n}")
    # What a kill while writing checkpoint-20 leaves: no marker, a shard cut short.
    (out / "checkpoint-20" / "COMPLETE").unlink()
    shard = out / "checkpoint-20" / "train_state" / "rank-1-of-2.safetensors"
    shard.write_bytes(shard.read_bytes()[:1000])
    # An explicit torn checkpoint is refused, naming it.
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, resume_from_checkpoint=str(
        out / "checkpoint-20")))
    proc = train(air_bin, cfg, 2, check=False)
    assert proc.returncode != 0 and "checkpoint-20: not a complete checkpoint" in proc.stdout + proc.stderr
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, resume_from_checkpoint="latest"))
    proc = train(air_bin, cfg, 2)
    assert "checkpoint-10 (step 10)" in proc.stdout
    assert losses_from(out, 11) == losses_from(straight, 11)
    # A flipped byte in a complete checkpoint's shard (the rerun rewrote checkpoint-30): an
    # error naming the file.
    shard = out / "checkpoint-30" / "train_state" / "rank-0-of-2.safetensors"
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0x40
    shard.write_bytes(bytes(data))
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, resume_from_checkpoint=str(
        out / "checkpoint-30")))
    proc = train(air_bin, cfg, 2, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "rank-0-of-2.safetensors: corrupt" in text, text


def test_other_model_or_batch_is_refused(tiny, straight, air_bin, tmp_path):
    other = tmp_path / "other"
    make_model(other, vocab=352)
    out = tmp_path / "out"
    out.mkdir()
    shutil.copytree(straight / "checkpoint-10", out / "checkpoint-10")
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, model_name=str(other),
                                            resume_from_checkpoint="latest"))
    proc = train(air_bin, cfg, 2, check=False)
    assert proc.returncode != 0 and "the checkpoint is of another model" in proc.stdout + proc.stderr
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, per_device_batch_size=1,
                                            resume_from_checkpoint="latest"))
    proc = train(air_bin, cfg, 2, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert ("the global batch (per_device_batch_size x ranks x gradient_accumulation_steps) is 4 in "
            "the checkpoint (4 x 1) but 2 now (2 x 1)") in text, text
    assert "global_batch_size: 4 keeps it on any number of ranks" in text
    assert not (out / "model.safetensors").exists()  # nothing was trained or written


def test_sigterm_checkpoints_and_exits_nonzero(tiny, straight, air_bin, tmp_path):
    out = tmp_path / "out"
    cfg = write(tmp_path / "p.yaml", params(tiny, out, 2, save_steps=0,
                                            resume_from_checkpoint="latest"))
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([air_bin, "train", "--config", str(cfg), "--threads", "1"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    deadline = time.monotonic() + 120
    while not ((out / "metrics.jsonl").exists() and len(metrics(out)) >= 3):
        assert time.monotonic() < deadline and procs[0].poll() is None, procs[0].communicate()
        time.sleep(0.005)
    for p in procs:
        p.send_signal(signal.SIGTERM)
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode != 0 for p in procs), results
    err = results[0][1]
    assert "stopped by SIGTERM after step" in err, results
    step = int(err.split("stopped by SIGTERM after step ")[1].split()[0])
    assert (out / f"checkpoint-{step}" / "COMPLETE").exists()
    proc = train(air_bin, cfg, 2)
    assert f"checkpoint-{step} (step {step})" in proc.stdout
    # save_steps 0 changes nothing numerically: the same losses as the straight run.
    assert [m["loss"] for m in metrics(out)][step:] == losses_from(straight, step + 1)


def test_air_run_retry_resumes_from_the_last_checkpoint(tiny, straight, air, air_bin, air_home,
                                                       tmp_path):
    out = tmp_path / "out"
    command = (f"{air_bin} launch --nnodes $NUM_NODES --node-rank $NODE_RANK "
               "--nproc-per-node 1 --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
               f"--no-python {air_bin} train --threads 1")
    spec = write_spec(tmp_path, command, name="fsdp-retry", nodes=2, per_node=1, max_retries=1,
                      parameters=params(tiny, out, 2, resume_from_checkpoint="latest"))
    run_id = submit(air, spec)
    marker = out / "checkpoint-10" / "COMPLETE"
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert time.monotonic() < deadline, "attempt 1 never reached checkpoint-10"
        time.sleep(0.005)
    # Kill one rank's `air train` of attempt 1 (found by its environment).
    victims = [pid for pid in run_processes(air_home, run_id)
               if b"train" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
               and b"launch" not in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert victims, "no air train process found"
    os.kill(victims[0], signal.SIGKILL)
    run = wait_terminal(air, run_id, timeout=400)
    logs = air("logs", run_id, "--node", 0, "--retry", 1).stdout
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    assert len(run["attempt_details"]) == 2
    assert "resumed from" in logs
    assert [m["step"] for m in metrics(out)] == list(range(1, STEPS + 1))
    assert losses_from(out, 11) == losses_from(straight, 11)


def test_elastic_retry_continues_on_the_node_left_from_the_last_checkpoint(
        tiny, straight, air, air_bin, air_home, tmp_path):
    """compute.min_nodes: 1 on 2 local nodes: node 1's agent is SIGKILLed after checkpoint-10;
    attempt 1 runs on the 1 node left (NUM_NODES=1, WORLD_SIZE=1), resumes checkpoint-10
    (resharded from 2 ranks to 1) and SUCCEEDS; the continuation matches the 2-rank run that was
    never stopped; air get and the MLflow run show each attempt's size."""
    out = tmp_path / "out"
    command = (f"echo \"attempt $AIR_ATTEMPT: NUM_NODES=$NUM_NODES WORLD_SIZE=$WORLD_SIZE\"; "
               f"exec {air_bin} launch --nnodes $NUM_NODES --node-rank $NODE_RANK "
               "--nproc-per-node 1 --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
               f"--no-python {air_bin} train --threads 1")
    # The global batch (4 rows) whatever the number of ranks: per_device_batch_size 2 on 2 ranks,
    # then 2 micro-batches of 2 on the 1 left (a checkpoint refuses another global batch).
    spec = write_spec(tmp_path, command, name="elastic", nodes=2, per_node=1, max_retries=1,
                      parameters=params(tiny, out, 2, resume_from_checkpoint="latest",
                                        global_batch_size=4))
    text = spec.read_text().replace("  num_accelerators: 2\n",
                                    "  num_accelerators: 2\n  min_nodes: 1\n")
    spec.write_text(text)
    run_id = submit(air, spec)
    marker = out / "checkpoint-10" / "COMPLETE"
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert time.monotonic() < deadline, "attempt 0 never reached checkpoint-10"
        time.sleep(0.005)
    code, env = air.json("get", run_id)
    node1 = next(n for n in env["data"]["attempt_details"][0]["nodes"] if n["node_rank"] == 1)
    os.kill(node1["agent_pid"], signal.SIGKILL)  # the node is lost, not its command
    run = wait_terminal(air, run_id, timeout=400)
    logs = air("logs", run_id, "--node", 0, "--retry", 1).stdout
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    first, second = run["attempt_details"]
    assert first["state"] == "FAILED" and first["num_nodes"] == 2 and first["world_size"] == 2
    assert [n["state"] for n in first["nodes"]][1] == "LOST", first
    assert second["state"] == "SUCCEEDED" and second["num_nodes"] == 1, second
    assert second["world_size"] == 1 and len(second["nodes"]) == 1, second
    assert "attempt 1: NUM_NODES=1 WORLD_SIZE=1" in logs, logs
    resumed = [l for l in logs.splitlines() if "resumed from" in l]
    # checkpoint-10, or a later one: how many steps the two ranks make between the kill and the
    # supervisor's stop depends on the machine's load (seen: checkpoint-20 on a busy host).
    assert resumed, logs
    resumed_step = int(resumed[0].split("(step ")[1].rstrip(")"))
    assert 10 <= resumed_step < STEPS, logs
    # The retry names the lost node, the rule and the new size (the UI's timeline, air's API).
    url = air.json("ui")[1]["data"]["url"]
    status, body, _ = http("GET", f"{url}api/air/runs/{run_id}", token=server_token(air_home))
    assert status == 200, body
    events = [e["message"] for e in json.loads(body)["events"]]
    assert any("attempt 0 lost 1 of its 2 nodes: node 1" in e and
               "continuing on the 1 node left (compute.min_nodes 1)" in e for e in events), events
    text = air("get", run_id).stdout
    assert "2 nodes" in text and "1 node " in text, text
    # One process resharded from two: the remaining steps follow the run never stopped.
    step = int(resumed[0].split("(step ")[1].rstrip(")"))
    assert [m["step"] for m in metrics(out)] == list(range(1, STEPS + 1))
    ours, ref = losses_from(out, step + 1), losses_from(straight, step + 1)
    assert max(abs(a - b) / abs(b) for a, b in zip(ours, ref)) <= 1e-4, (ours, ref)
    assert run_processes(air_home, run_id) == []
    # The MLflow run (air's own server), read by the real mlflow client, has each attempt's size.
    probe = run_mlflow(f"""
        import json, mlflow
        print(json.dumps(mlflow.MlflowClient().get_run({run["mlflow_run_id"]!r}).data.tags))
        """, url)
    tags = json.loads(probe.stdout.strip().splitlines()[-1])
    assert tags.get("air.attempt.0.num_nodes") == "2", tags
    assert tags.get("air.attempt.1.num_nodes") == "1" and tags.get("air.num_nodes") == "1", tags
