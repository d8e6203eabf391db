"""The real, unmodified mlflow client (PyPI) against `air server`: experiments, runs resumed by
id, params, 10,000 metric points, tags, an artifact, read back with MlflowClient; MLflow's
errors; 8 concurrent writers; bad input; the token off loopback. Every request carries the
server's token (tests/python/test_server_security.py shows what happens without it)."""
import functools
import json
import os
import socket

import pytest

from tracking_helpers import AirServer, run_mlflow
from tracking_helpers import http as http3


@pytest.fixture
def server(air_bin, air_home):
    srv = AirServer(air_bin, air_home)
    yield srv
    assert srv.stop() == 0


def http(method, url, body=None, token=None, raw=None):
    status, data, _ = http3(method, url, body=body, token=token, raw=raw)
    return status, data


def test_mlflow_client_round_trip(server, tmp_path):
    out = run_mlflow(f"""
        import json, math, os
        import mlflow
        from mlflow import MlflowClient
        from mlflow.entities import Metric
        from mlflow.exceptions import MlflowException
        c = MlflowClient()
        eid = c.create_experiment("sft-exp")
        assert c.get_experiment_by_name("sft-exp").experiment_id == eid
        run_id = c.create_run(eid, run_name="first").info.run_id
        # Resume the run by id, as a workload does with MLFLOW_RUN_ID.
        with mlflow.start_run(run_id=run_id):
            mlflow.log_params({{"lr": 2e-5, "batch_size": 4, "model": "tiny"}})
            mlflow.log_param("world_size", 4)
            mlflow.set_tag("stage", "sft")
            for step in range(100):
                mlflow.log_metric("loss", 10.0 - step * 0.01, step=step)
            for start in range(100, 10000, 1000):
                c.log_batch(run_id, metrics=[Metric("loss", 10.0 - s * 0.01, 1000 + s, s)
                                             for s in range(start, min(start + 1000, 10000))])
            mlflow.log_metric("odd", float("nan"), step=1)
            mlflow.log_metric("big", float("inf"), step=1)
            path = os.path.join({str(tmp_path)!r}, "notes.txt")
            open(path, "w").write("hello artifact")
            mlflow.log_artifact(path)
            mlflow.log_artifact(path, artifact_path="sub/dir")
        run = c.get_run(run_id)
        history = c.get_metric_history(run_id, "loss")
        steps = sorted(m.step for m in history)
        assert steps == list(range(10000)), (len(steps), steps[:5])
        assert all(abs(m.value - (10.0 - m.step * 0.01)) < 1e-12 for m in history)
        assert math.isnan(c.get_metric_history(run_id, "odd")[0].value)
        files = sorted(f.path for f in c.list_artifacts(run_id))
        local = c.download_artifacts(run_id, "notes.txt", {str(tmp_path)!r} + "/dl")
        found = c.search_runs([eid], "params.model = 'tiny' and metrics.loss < 1")
        none = c.search_runs([eid], "params.model = 'other'")
        ordered = c.search_runs([eid], order_by=["metrics.loss DESC"], max_results=5)
        errors = {{}}
        try:
            c.get_run("0123456789abcdef0123456789abcdef")
        except MlflowException as e:
            errors["unknown"] = [e.error_code, str(e)]
        try:
            c.log_param(run_id, "lr", 1e-3)
        except MlflowException as e:
            errors["changed"] = [e.error_code, str(e).splitlines()[0]]
        print(json.dumps({{
            "status": run.info.status, "name": run.info.run_name,
            "params": run.data.params, "tags": {{k: v for k, v in run.data.tags.items()}},
            "latest_loss": run.data.metrics["loss"], "big": run.data.metrics["big"],
            "files": files, "artifact": open(local).read(),
            "found": [r.info.run_id for r in found], "none": len(none), "ordered": len(ordered),
            "run_id": run_id, "errors": errors}}))
    """, server.url)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["status"] == "FINISHED"
    assert got["name"] == "first"
    assert got["params"] == {"lr": "2e-05", "batch_size": "4", "model": "tiny", "world_size": "4"}
    assert got["tags"]["stage"] == "sft" and got["tags"]["mlflow.runName"] == "first"
    assert got["latest_loss"] == pytest.approx(10.0 - 9999 * 0.01)
    assert got["big"] == 1.7976931348623157e308  # MLflow stores +inf as the largest double
    assert got["files"] == ["notes.txt", "sub"]
    assert got["artifact"] == "hello artifact"
    assert got["found"] == [got["run_id"]] and got["none"] == 0 and got["ordered"] == 1
    assert got["errors"]["unknown"][0] == "RESOURCE_DOES_NOT_EXIST"
    assert "Run with id=0123456789abcdef0123456789abcdef not found" in got["errors"]["unknown"][1]
    assert got["errors"]["changed"][0] == "INVALID_PARAMETER_VALUE"
    assert "Changing param values is not allowed. Param with key='lr' was already logged " \
           "with value='2e-05'" in got["errors"]["changed"][1]


WRITER = """
import os, sys
from mlflow import MlflowClient
from mlflow.entities import Metric
c = MlflowClient()
run_id, key = sys.argv[1], sys.argv[2]
batches = [[Metric(key, float(s), 1000 + s, s) for s in range(b, b + 1000)]
           for b in range(0, 10000, 1000)]
for i, batch in enumerate(batches):
    c.log_batch(run_id, metrics=batch)
    if i == 3:
        c.log_batch(run_id, metrics=batch)  # a retried request stores nothing twice
"""


def test_eight_concurrent_writers_store_every_point_once(server):
    import subprocess
    import sys
    out = run_mlflow("""
        from mlflow import MlflowClient
        c = MlflowClient()
        print(c.create_run(c.create_experiment("concurrent")).info.run_id)
    """, server.url)
    run_id = out.stdout.strip().splitlines()[-1]
    env = dict(os.environ, MLFLOW_TRACKING_URI=server.url, NO_PROXY="*",
               MLFLOW_TRACKING_TOKEN=server.token)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, run_id, f"w{i}"], env=env,
                                stderr=subprocess.PIPE, text=True) for i in range(8)]
    for w in writers:
        _, err = w.communicate(timeout=600)
        assert w.returncode == 0, err[-3000:]
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        c = MlflowClient()
        counts = {{}}
        for i in range(8):
            h = c.get_metric_history({run_id!r}, f"w{{i}}")
            steps = [m.step for m in h]
            counts[i] = [len(steps), len(set(steps)), min(steps), max(steps)]
        print(json.dumps(counts))
    """, server.url)
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert sum(c[0] for c in counts.values()) == 80000
    for c in counts.values():
        assert c == [10000, 10000, 0, 9999]


def test_bad_input_gets_mlflow_errors_and_stores_nothing(server):
    base = server.url + "/api/2.0/mlflow"
    http = functools.partial(http_with_token, server.token)
    status, body = http("POST", base + "/runs/create", raw=b"{not json")
    assert status == 400 and json.loads(body)["error_code"] == "MALFORMED_REQUEST"
    status, body = http("GET", server.url + "/api/2.0/mlflow/no-such-endpoint")
    assert status == 404 and json.loads(body)["error_code"] == "ENDPOINT_NOT_FOUND"
    status, body = http("POST", base + "/runs/create", {"experiment_id": "0"})
    run_id = json.loads(body)["run"]["info"]["run_id"]
    # A batch with one bad entry stores none of it.
    status, body = http("POST", base + "/runs/log-batch", {
        "run_id": run_id,
        "metrics": [{"key": "ok", "value": 1, "timestamp": 1, "step": 0}],
        "params": [{"key": "p", "value": "x" * 6001}]})
    assert status == 400 and "exceeds the maximum length" in json.loads(body)["message"]
    status, body = http("POST", base + "/runs/log-batch", {
        "run_id": run_id,
        "metrics": [{"key": "m", "value": 1, "timestamp": 1, "step": s} for s in range(1001)]})
    assert status == 400 and "at most 1000 metrics" in json.loads(body)["message"]
    status, body = http("POST", base + "/runs/log-metric",
                        {"run_id": run_id, "key": "bad key!", "value": 1, "timestamp": 1})
    assert status == 400 and "Names may only contain" in json.loads(body)["message"]
    status, body = http("POST", base + "/runs/log-metric",
                        {"run_id": run_id, "key": "v", "value": "abc", "timestamp": 1})
    assert status == 400 and json.loads(body)["error_code"] == "INVALID_PARAMETER_VALUE"
    for value in ["NaN", "-Infinity"]:
        status, body = http("POST", base + "/runs/log-metric",
                            {"run_id": run_id, "key": "special", "value": value, "timestamp": 2,
                             "step": 0 if value == "NaN" else 1})
        assert status == 200, body
    status, body = http("GET", base + f"/runs/get?run_id={run_id}")
    data = json.loads(body)["run"]["data"]
    assert "params" not in data
    assert {m["key"] for m in data["metrics"]} == {"special"}
    status, body = http("GET", base + f"/metrics/get-history?run_id={run_id}&metric_key=special")
    assert [m["value"] for m in json.loads(body)["metrics"]] == ["NaN", -1.7976931348623157e308]
    # Artifact paths that would leave the artifact directory are refused.
    port = int(server.url.rsplit(":", 1)[1])
    for path in ["0/../../../etc/passwd", "0/./x", "0/a/../../b"]:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(f"GET /api/2.0/mlflow-artifacts/artifacts/{path} HTTP/1.1\r\n"
                      f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {server.token}\r\n"
                      f"Connection: close\r\n\r\n".encode())
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert b"root:" not in reply
        assert reply.split(b" ")[1] in (b"400", b"404"), reply[:200]
    status, body = http("GET", server.url + "/api/2.0/mlflow-artifacts/artifacts?path=../..")
    assert status == 400 and b"Invalid path" in body


def http_with_token(token, method, url, body=None, raw=None):
    return http(method, url, body=body, token=token, raw=raw)


def test_token_required_off_loopback(air_bin, air_home):
    srv = AirServer(air_bin, air_home, "--host", "0.0.0.0")
    try:
        assert srv.info["token_required"] is True
        token = (air_home / "tracking" / "server.token").read_text().strip()
        assert oct((air_home / "tracking" / "server.token").stat().st_mode & 0o777) == "0o600"
        url = srv.url + "/api/2.0/mlflow/experiments/get?experiment_id=0"
        for path in ["/api/2.0/mlflow/experiments/get?experiment_id=0", "/api/air/runs"]:
            status, body = http("GET", srv.url + path)
            assert status == 401, (path, status)
            assert token.encode() not in body
        # The UI's page files hold no data: served to anyone, without the token in them.
        status, body = http("GET", srv.url + "/")
        assert status == 200 and b"<html" in body.lower() and token.encode() not in body
        status, _ = http("GET", url, token="wrong" + token[5:])
        assert status == 401
        status, body = http("GET", url, token=token)
        assert status == 200 and json.loads(body)["experiment"]["name"] == "Default"
        out = run_mlflow("""
            from mlflow import MlflowClient
            print(MlflowClient().get_experiment("0").name)
        """, srv.url, env={"MLFLOW_TRACKING_TOKEN": token})
        assert out.stdout.strip().splitlines()[-1] == "Default"
        # The token is in no file air serves or logs.
        log = (air_home / "tracking").glob("*.log")
        assert all(token not in p.read_text() for p in log)
    finally:
        assert srv.stop() == 0
