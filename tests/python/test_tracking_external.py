"""An external MLflow server named by `tracking_uri` in AIR_HOME/config.yaml, with air's
credentials for it in air secrets (`tracking_token_secret`, or `tracking_username_secret` and
`tracking_password_secret`), and tracking runs that end through reconcile.

The external server is a real auth-enforcing MLflow-API server: a second AIR_HOME's
`air server` bound off loopback, which answers 401 to every request without its token (Bearer,
or basic auth with the token as the password). The nodes log into it with the real `mlflow`
client. Checked: air's own calls (create, end status and tags) carry the credentials; the nodes
get them as secrets (redacted in logs, never under AIR_HOME or in any process's argv); a wrong
or missing credential and an unreachable server are clear errors at submit that name the server
and the secret (never its value) and create no run; and a run whose supervisor is SIGKILLed
ends FAILED (reconcile) or KILLED (`air cancel`) in air's tracking and on the external server.
`air train` under air run sends the injected basic-auth credentials with its metric batches.
"""
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from runtime_jobs.helpers import get, submit, wait_for, write_spec
from test_secrets_run import _cmdlines, _grep_tree
from tracking_helpers import AirServer, run_mlflow

MLFLOW_ENV = {"GIT_PYTHON_REFRESH": "quiet", "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
              "NO_PROXY": "*"}


@pytest.fixture
def external(air_bin, tmp_path):
    """(url, token) of an auth-enforcing MLflow-API server in its own AIR_HOME."""
    home = tmp_path / "external_home"
    server = AirServer(air_bin, home, "--host", "0.0.0.0", "--port", "0")
    token = (home / "tracking" / "server.token").read_text().strip()
    assert token
    yield server.url, token
    server.stop()


def configure(air, air_home, url, secrets):
    """config.yaml naming `url` and the given tracking_*_secret keys; stores the secrets."""
    lines = [f"tracking_uri: {url}"]
    scopes = set()
    for key, (path, value) in secrets.items():
        lines.append(f"tracking_{key}_secret: {path}")
        scope, name = path.split("/")
        if scope not in scopes:
            assert air("secrets", "create-scope", scope).returncode == 0
            scopes.add(scope)
        if value is not None:
            proc = air("secrets", "put-secret", scope, name, input=value)
            assert proc.returncode == 0, proc.stderr
    (air_home / "config.yaml").write_text("\n".join(lines) + "\n")


def read_external(url, token, run_id):
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        c = MlflowClient()
        r = c.get_run({run_id!r})
        print(json.dumps({{"status": r.info.status, "params": r.data.params, "tags": r.data.tags,
                          "steps": [m.step for m in c.get_metric_history({run_id!r}, "m")]}}))
    """, url, env={"MLFLOW_TRACKING_TOKEN": token})
    return json.loads(out.stdout.strip().splitlines()[-1])


NODE_SCRIPT = """\
{python} - <<'EOF'
import os, mlflow
assert os.environ["MLFLOW_TRACKING_URI"] == {url!r}, os.environ["MLFLOW_TRACKING_URI"]
for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
    print(name, "=", os.environ.get(name, "(unset)"), flush=True)
mlflow.start_run(run_id=os.environ["MLFLOW_RUN_ID"])
mlflow.log_param("p", "1")
mlflow.log_metric("m", 2.0, step=3)
mlflow.end_run()
EOF
"""


@pytest.mark.parametrize("auth", ["token", "basic"])
def test_config_tracking_uri_with_credentials_from_air_secrets(air, air_home, tmp_path,
                                                               external, auth):
    url, token = external
    if auth == "token":
        configure(air, air_home, url, {"token": ("mlflow/token", token)})
    else:
        configure(air, air_home, url, {"username": ("mlflow/user", "trainer-bot"),
                                       "password": ("mlflow/password", token)})
    spec = write_spec(tmp_path, NODE_SCRIPT.format(python=sys.executable, url=url),
                      name="external-config", nodes=1, timeout_minutes=5,
                      env_variables=MLFLOW_ENV)
    run_id = submit(air, spec)
    seen_argv = []
    run = get(air, run_id)
    while run["state"] not in ("SUCCEEDED", "FAILED", "INTERNAL_ERROR", "TIMED_OUT"):
        seen_argv += [c for c in _cmdlines().values() if token.encode() in c]
        time.sleep(0.05)
        run = get(air, run_id)
    log = air("logs", run_id, "--node", 0).stdout
    assert run["state"] == "SUCCEEDED", log[-3000:]
    # The nodes got the credential as a secret: redacted in the log, in no argv, not stored.
    if auth == "token":
        assert "MLFLOW_TRACKING_TOKEN = [REDACTED]" in log, log
        assert "MLFLOW_TRACKING_PASSWORD = (unset)" in log, log
    else:
        assert "MLFLOW_TRACKING_PASSWORD = [REDACTED]" in log, log
        assert "MLFLOW_TRACKING_USERNAME = [REDACTED]" in log, log
        assert "MLFLOW_TRACKING_TOKEN = (unset)" in log, log
    assert token not in log
    assert not seen_argv
    assert not _grep_tree(air_home, [token.encode()])
    # The run lives on the external server: air created it (air.* tags), the node logged into
    # it, and air set its end status and tags there.
    got = read_external(url, token, run["mlflow_run_id"])
    assert got["status"] == "FINISHED"
    assert got["params"] == {"p": "1"}
    assert got["steps"] == [3]
    assert got["tags"]["air.run_id"] == str(run_id)
    assert got["tags"]["air.state"] == "SUCCEEDED"
    # Nothing went to air's own server.
    assert not (air_home / "tracking" / "server.json").exists()


def test_bad_credentials_and_unreachable_servers_are_clear_errors_at_submit(
        air, air_home, tmp_path, external):
    url, token = external
    spec = write_spec(tmp_path, "true", name="external-bad", nodes=1)
    wrong = "wrong-" + token[:8] + "-value"

    def refused(expect):
        proc = air("run", "-f", spec)
        assert proc.returncode != 0
        for text in expect:
            assert text in proc.stderr, proc.stderr
        assert wrong not in proc.stderr and token not in proc.stderr
        return proc.stderr

    # A wrong token: the server and the secret are named, the value is not.
    configure(air, air_home, url, {"token": ("mlflow/token", wrong)})
    refused([url, "refused air's credentials", "tracking_token_secret mlflow/token",
             str(air_home / "config.yaml")])
    # A wrong basic-auth password.
    configure(air, air_home, url, {"username": ("basic/user", "u"),
                                   "password": ("basic/password", wrong)})
    refused([url, "refused air's credentials",
             "tracking_username_secret basic/user, tracking_password_secret basic/password"])
    # No credentials named for a server that needs them.
    (air_home / "config.yaml").write_text(f"tracking_uri: {url}\n")
    refused([url, "it needs credentials", "tracking_token_secret"])
    # A secret that does not exist.
    configure(air, air_home, url, {"token": ("missing/token", None)})
    refused(["tracking_token_secret missing/token", url, "has no key 'token'"])
    # An unreachable server named by config.yaml.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    (air_home / "config.yaml").write_text(f"tracking_uri: {dead}\n")
    refused([f"config.yaml: tracking_uri {dead}: the MLflow server cannot be used",
             "correct tracking_uri there, or remove it"])
    # Not a URL at all.
    (air_home / "config.yaml").write_text("tracking_uri: databricks\n")
    refused(["config.yaml:1: tracking_uri: 'databricks' is not an http:// or https:// URL"])
    # None of these created a run.
    (air_home / "config.yaml").unlink()
    code, listed = air.json("list")
    assert code == 0 and listed["data"]["runs"] == [], listed


def _start_sleeping_run(air, tmp_path, name):
    mark = tmp_path / f"{name}.started"
    spec = write_spec(tmp_path, f'touch "{mark}"\nsleep 600\n', name=name, nodes=1,
                      filename=f"{name}.yaml")
    run_id = submit(air, spec)
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert time.monotonic() < deadline, get(air, run_id)
        time.sleep(0.05)
    return run_id, get(air, run_id)


def _kill_supervisor(run):
    """SIGKILL, then wait until it is dead (gone or a zombie): the signal is asynchronous."""
    pid = run["supervisor_pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError(f"supervisor {pid} survived SIGKILL")


def _tracking_status(url, run_id, token=None):
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        r = MlflowClient().get_run({run_id!r})
        print(json.dumps([r.info.status, r.data.tags.get("air.state")]))
    """, url, env={"MLFLOW_TRACKING_TOKEN": token} if token else None)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("where", ["air", "external"])
def test_runs_ended_by_reconcile_end_their_tracking_run(air, air_home, tmp_path, request,
                                                        where):
    token = None
    if where == "external":
        url, token = request.getfixturevalue("external")
        configure(air, air_home, url, {"token": ("mlflow/token", token)})
    # The supervisor dies: the next `air get` reconciles the run to INTERNAL_ERROR.
    died, run = _start_sleeping_run(air, tmp_path, "died")
    _kill_supervisor(run)
    run = wait_for(air, died, lambda r: r["state"] == "INTERNAL_ERROR", timeout=30)
    # Canceling a run whose supervisor died ends it CANCELED.
    canceled, run2 = _start_sleeping_run(air, tmp_path, "canceled")
    _kill_supervisor(run2)
    proc = air("cancel", canceled)
    assert proc.returncode == 0, proc.stderr
    run2 = get(air, canceled)
    assert run2["state"] == "CANCELED", run2
    if where == "air":
        url = json.loads((air_home / "tracking" / "server.json").read_text())["url"]
    assert _tracking_status(url, run["mlflow_run_id"], token) == ["FAILED", "INTERNAL_ERROR"]
    assert _tracking_status(url, run2["mlflow_run_id"], token) == ["KILLED", "CANCELED"]


def test_air_train_logs_into_the_external_server_with_basic_auth(air, air_home, tmp_path,
                                                                 external):
    from test_tracking_train import train_spec
    url, token = external
    configure(air, air_home, url, {"username": ("mlflow/user", "trainer-bot"),
                                   "password": ("mlflow/password", token)})
    spec = train_spec(tmp_path, "external-train-basic", steps=3)
    run_id = submit(air, spec)
    run = wait_for(air, run_id, lambda r: r["state"] not in ("PENDING", "RUNNING"), timeout=300)
    log = air("logs", run_id, "--node", 0).stdout
    assert run["state"] == "SUCCEEDED", log[-3000:]
    assert "not sent" not in log, log[-3000:]  # air train reports unsent points
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        c = MlflowClient()
        r = c.get_run({run["mlflow_run_id"]!r})
        print(json.dumps([r.info.status, [m.step for m in c.get_metric_history(r.info.run_id,
                                                                                "loss")]]))
    """, url, env={"MLFLOW_TRACKING_USERNAME": "x", "MLFLOW_TRACKING_PASSWORD": token})
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["FINISHED", [1, 2, 3]]


@pytest.fixture
def mlflow_basic_auth(tmp_path):
    """(url, user, password) of the real `mlflow server --app-name basic-auth` (MLflow's own
    authentication app: users in its own database, basic auth on every request)."""
    root = tmp_path / "mlflow_auth"
    root.mkdir()
    user, password = "air-admin", "air-admin-password-7f3a9c"
    (root / "basic_auth.ini").write_text(
        "[mlflow]\n"
        "default_permission = READ\n"
        f"database_uri = sqlite:///{root}/basic_auth.db\n"
        f"admin_username = {user}\n"
        f"admin_password = {password}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MLFLOW_AUTH_CONFIG_PATH=str(root / "basic_auth.ini"),
               MLFLOW_FLASK_SERVER_SECRET_KEY=os.urandom(16).hex(), **MLFLOW_ENV)
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--app-name", "basic-auth",
         "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{root}/mlflow.db",
         "--default-artifact-root", str(root / "artifacts")],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        assert proc.poll() is None, (root / "server.log").read_text()[-3000:]
        assert time.monotonic() < deadline, (root / "server.log").read_text()[-3000:]
        time.sleep(0.5)
    # The first authenticated request initializes the auth app (its database, lazy imports):
    # make it here, so that air's own requests (10 s timeout) meet a warm server.
    request = urllib.request.Request(url + "/api/2.0/mlflow/experiments/search?max_results=1")
    request.add_header("Authorization", "Basic " + base64.b64encode(
        f"{user}:{password}".encode()).decode())
    with urllib.request.urlopen(request, timeout=120) as r:
        assert r.status == 200
    yield url, user, password
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log.close()


def test_basic_auth_against_the_real_mlflow_basic_auth_server(air, air_home, tmp_path,
                                                               mlflow_basic_auth):
    """MLflow's own basic-auth app, not air's server: air creates and ends the run there with
    the user and password from air secrets, the node's mlflow client logs with them, and a wrong
    password is refused at submit, naming the server and the secret."""
    url, user, password = mlflow_basic_auth
    configure(air, air_home, url, {"username": ("mlflow/user", user),
                                   "password": ("mlflow/password", "not-" + password)})
    spec = write_spec(tmp_path, NODE_SCRIPT.format(python=sys.executable, url=url),
                      name="basic-auth", nodes=1, timeout_minutes=5, env_variables=MLFLOW_ENV)
    refused = air("run", "-f", spec)
    assert refused.returncode != 0, refused.stdout
    assert url in refused.stderr and "mlflow/password" in refused.stderr, refused.stderr
    assert password not in refused.stderr
    assert air("secrets", "put-secret", "mlflow", "password", input=password).returncode == 0
    run_id = submit(air, spec)
    run = wait_for(air, run_id, lambda r: r["state"] not in ("PENDING", "RUNNING"), timeout=300)
    log = air("logs", run_id, "--node", 0).stdout
    assert run["state"] == "SUCCEEDED", log[-3000:]
    assert "MLFLOW_TRACKING_PASSWORD = [REDACTED]" in log and password not in log, log
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        c = MlflowClient()
        r = c.get_run({run["mlflow_run_id"]!r})
        print(json.dumps({{"status": r.info.status, "params": r.data.params,
                          "tags": r.data.tags}}))
    """, url, env={"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["status"] == "FINISHED" and got["params"] == {"p": "1"}, got
    assert got["tags"]["air.run_id"] == str(run_id) and got["tags"]["air.state"] == "SUCCEEDED"
    # Without credentials MLflow's app refuses (so the above really went through its auth).
    denied = run_mlflow(f"""
        from mlflow import MlflowClient
        MlflowClient().get_run({run["mlflow_run_id"]!r})
    """, url, check=False)
    assert denied.returncode != 0 and "401" in denied.stderr + denied.stdout, denied.stderr[-2000:]
