"""`air train` logs natively (rank 0, background thread, bounded queue): under `air run` into
air's own tracking server, with the server killed mid-run (training and the run go on, the next
command restarts the server, nothing stored is lost); and, with MLFLOW_TRACKING_URI naming a
real `mlflow server` (SQLite) at submit, into that server, which gets the terminal status."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml

from runtime_jobs.helpers import free_port, get, submit, wait_for, wait_terminal, write_spec
from test_train_cli import make_model, write_pretokenized
from tracking_helpers import run_mlflow


def train_spec(tmp_path, name, steps, command="air train --threads 1\n", **extra):
    model = tmp_path / "tiny"
    make_model(model)
    data = tmp_path / "data.jsonl"
    write_pretokenized(data, n=16)
    return write_spec(tmp_path, command, name=name, nodes=1, per_node=1, timeout_minutes=10,
                      parameters={"model_name": str(model), "dataset_name": str(data),
                                  "output_dir": str(tmp_path / "out"), "max_steps": steps,
                                  "logging_steps": 1, "per_device_batch_size": 2,
                                  "max_seq_len": 16, "learning_rate": 0.001}, **extra)


def history(url, run_id, key):
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        c = MlflowClient()
        r = c.get_run({run_id!r})
        print(json.dumps({{"status": r.info.status, "params": r.data.params,
                          "steps": [m.step for m in c.get_metric_history({run_id!r}, {key!r})]}}))
    """, url)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_air_train_logs_and_survives_a_killed_tracking_server(air, air_home, tmp_path):
    # The node trains once, waits until the test has killed the tracking server, then trains
    # again (same parameters) with the server gone.
    killed = tmp_path / "killed"
    command = ("air train --threads 1\n"
               f'while [ ! -e "{killed}" ]; do sleep 0.1; done\n'
               f"air train --threads 1 --set output_dir={tmp_path / 'out2'}\n")
    spec = train_spec(tmp_path, "native-train", steps=5, command=command)
    run_id = submit(air, spec)
    info_path = air_home / "tracking" / "server.json"
    run = wait_for(air, run_id, lambda r: r["state"] != "PENDING" and info_path.exists(),
                   timeout=60)
    info = json.loads(info_path.read_text())
    deadline = time.monotonic() + 120
    before = []
    while time.monotonic() < deadline and len(before) < 5:
        before = history(info["url"], run["mlflow_run_id"], "loss")["steps"]
    assert before == [1, 2, 3, 4, 5]
    os.kill(info["pid"], signal.SIGKILL)
    killed.touch()
    run = wait_terminal(air, run_id, timeout=300)
    log = air("logs", run_id, "--node", 0).stdout
    assert run["state"] == "SUCCEEDED", log[-3000:]
    # The second training ran to the end and reported what it could not send.
    assert "tracking: 0 metric points sent, 20 not sent" in log, log[-3000:]
    # The next command starts the server again, on the same port; nothing stored is lost.
    code, ui = air.json("ui")
    assert code == 0, ui
    url = ui["data"]["url"].rstrip("/")
    assert url == info["url"]
    after = history(url, run["mlflow_run_id"], "loss")
    assert after["status"] == "FINISHED"
    assert after["steps"] == [1, 2, 3, 4, 5]
    assert after["params"]["model_name"] == str(tmp_path / "tiny")
    assert after["params"]["total_steps"] == "5"
    # Its progress (air get): the steps and tokens/s it logged, total_steps as max_steps; no MFU
    # on the CPU (no peak to measure against).
    progress = get(air, run_id)["progress"]
    assert (progress["step"], progress["max_steps"]) == (5, 5), progress
    assert progress["step_source"] == "metrics", progress
    assert progress["max_steps_source"] == "param total_steps", progress
    assert progress["tokens_per_s"] > 0 and progress["mfu"] is None, progress
    assert progress["gpu_hours"] == 0 and progress["eta_s"] is None, progress


@pytest.fixture
def mlflow_server(tmp_path):
    port = free_port()
    mlflow_bin = os.path.join(os.path.dirname(sys.executable), "mlflow")
    proc = subprocess.Popen(
        [mlflow_bin, "server", "--backend-store-uri", f"sqlite:///{tmp_path}/mlflow.db",
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    import urllib.request
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("mlflow server did not start: " + proc.stderr.read().decode())
            time.sleep(0.5)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def test_air_train_logs_into_an_external_mlflow_server(air, air_home, tmp_path, mlflow_server):
    spec = train_spec(tmp_path, "external-train", steps=6)
    env = dict(os.environ, MLFLOW_TRACKING_URI=mlflow_server)
    run_id = submit(air, spec, env=env)
    run = wait_terminal(air, run_id, timeout=300)
    assert run["state"] == "SUCCEEDED", air("logs", run_id, "--node", 0).stdout[-3000:]
    got = history(mlflow_server, run["mlflow_run_id"], "loss")
    assert got["status"] == "FINISHED"
    assert got["steps"] == [1, 2, 3, 4, 5, 6]
    assert got["params"]["total_steps"] == "6"
    # Tracked elsewhere: progress from air train's progress lines in the node's log.
    progress = get(air, run_id)["progress"]
    assert (progress["step"], progress["max_steps"]) == (6, 6), progress
    assert progress["step_source"] == "log", progress
    assert progress["max_steps_source"] == "parameters.max_steps", progress
    assert progress["tokens_per_s"] is None, progress
    # Nothing of it went to air's own server.
    assert not (air_home / "tracking" / "server.json").exists()
    # An unreachable server is a clear error at submit, and no run is left behind to start.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    proc = air("run", "-f", spec, env=dict(os.environ, MLFLOW_TRACKING_URI=dead))
    assert proc.returncode != 0
    assert f"MLFLOW_TRACKING_URI={dead}: the MLflow server cannot be used" in proc.stderr
