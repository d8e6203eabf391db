"""Tracking reachable from Slurm nodes (docs/tracking.md, docs/slurm.md): with
`tracking_server: {host: 0.0.0.0}` in config.yaml the on-demand `air server` binds every address
and requires its generated token; nodes get MLFLOW_TRACKING_URI naming the submit host (not
loopback) and the token as the secret MLFLOW_TRACKING_TOKEN, which the real mlflow client sends as
Bearer. The token is redacted from the nodes' logs and appears in no batch script, `scontrol
show job`, launch file or argv; without it the server answers 401."""
import json
import os
import socket
import sys
import urllib.error
import urllib.request

from mlflow.tracking import MlflowClient

from runtime_jobs.helpers import explain, submit, wait_terminal, write_spec
from runtime_jobs.slurm_cluster import SLURM_DIR, assert_not_in_any_argv, assert_not_in_files, \
    assert_not_in_slurm_job, hostnames, job_of, slurm_cluster, slurm_home, \
    write_config  # noqa: F401 (fixtures)

LOG_SCRIPT = """
import os, socket, mlflow
rank = os.environ["NODE_RANK"]
print("uri", os.environ["MLFLOW_TRACKING_URI"], "token", os.environ["MLFLOW_TRACKING_TOKEN"])
with mlflow.start_run(run_id=os.environ["MLFLOW_RUN_ID"]):
    mlflow.log_param(f"host_{rank}", socket.gethostname())
    for step in range(3):
        mlflow.log_metric(f"loss_{rank}", 1.0 / (step + 1), step=step)
print("logged")
"""


def test_mlflow_client_on_slurm_nodes_logs_into_air_with_the_token(air, slurm_home, tmp_path,
                                                                   monkeypatch):
    write_config(slurm_home, {"backend": "slurm", "slurm": {"partition": "debug"},
                              "tracking_server": {"host": "0.0.0.0"}})
    code = tmp_path / "code"
    code.mkdir()
    (code / "log_metrics.py").write_text(LOG_SCRIPT)
    python = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin", "python")
    spec = write_spec(tmp_path, f"{python} log_metrics.py", nodes=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"OMP_NUM_THREADS": "1"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=180)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", explain(run, logs)

    info = json.loads((slurm_home / "tracking" / "server.json").read_text())
    assert info["host"] == "0.0.0.0" and info["token_required"] is True, info
    token = (slurm_home / "tracking" / "server.token").read_text().strip()
    node_uri = f"http://{socket.gethostname()}:{info['port']}"
    for n in (0, 1):
        assert f"uri {node_uri} token [REDACTED]" in logs[n] and "logged" in logs[n], logs[n]
        assert token not in logs[n]

    # Readable afterwards through the real client, with the token; 401 without it.
    hosts = hostnames(job_of(f"air-{run_id}-0")["NodeList"])
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
    client = MlflowClient(tracking_uri=node_uri)
    tracked = client.get_run(run["mlflow_run_id"])
    assert tracked.data.params == {"host_0": hosts[0], "host_1": hosts[1]}, tracked.data.params
    assert tracked.info.status == "FINISHED"
    history = client.get_metric_history(run["mlflow_run_id"], "loss_1")
    assert [(m.step, m.value) for m in history] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]
    url = f"{node_uri}/api/2.0/mlflow/runs/get?run_id={run['mlflow_run_id']}"
    try:
        urllib.request.urlopen(url, timeout=10)
        raise AssertionError("the server answered without the token")
    except urllib.error.HTTPError as e:
        assert e.code == 401, e
    request = urllib.request.Request(url, headers={"Authorization": "Bearer wrong"})
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("the server answered a wrong token")
    except urllib.error.HTTPError as e:
        assert e.code == 401, e

    # The token is nowhere else: not in Slurm's view of the job, the batch script, air's launch
    # files, Slurm's logs and state, or any process's argv (the server reads it from its file).
    assert_not_in_slurm_job(job_of(f"air-{run_id}-0")["JobId"], token)
    assert_not_in_files([slurm_home / "runs", SLURM_DIR], token)
    assert_not_in_any_argv(token)
