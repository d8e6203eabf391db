"""`air server` on a shared machine (docs/tracking.md, "Threat model"), probed with real
processes: another local user, created here with useradd, gets 401 on every route class but
the UI's page files (the same for everyone, no data) and can read neither the token nor the
owner's login file, while the owner's CLI, the mlflow client on the nodes and a browser session
(a header, never a cookie) keep working; browser rules (Origin, content type, Host, CORS, GET
never writes); a body nested 150,000 levels deep is a 400 and the server answers /health after; slow or silent
sockets of one user cannot stall the server for another; a 600 MB artifact upload and download
keep the server's resident memory under 100 MB; config.yaml's quotas give 413; symbolic links
under the artifact root are never followed."""
import hashlib
import http.client as httpclient
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from local_users import SYSTEM_PYTHON, local_user, run_as
from runtime_jobs.helpers import explain, submit, wait_terminal, write_spec
from tracking_helpers import AirServer, http, redeem_login_code, run_mlflow, ui_login_code

MIB = 1 << 20
WEB = pathlib.Path(__file__).resolve().parents[2] / "web"


@pytest.fixture(scope="module")
def other_user():
    """A second local user, created for these tests and removed after."""
    with local_user() as entry:
        yield entry


def rss_kib(pid, field):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


@pytest.fixture
def server(air_bin, air_home):
    srv = AirServer(air_bin, air_home)
    yield srv
    assert srv.stop() == 0


NODE_LOGS = (
    "python -c \"import mlflow, os; mlflow.start_run(run_id=os.environ['MLFLOW_RUN_ID']); "
    "mlflow.log_param('lr', 0.01); mlflow.log_metric('loss', 0.5, step=1); "
    "open('notes.txt', 'w').write('from the node'); mlflow.log_artifact('notes.txt'); "
    "print('token', os.environ['MLFLOW_TRACKING_TOKEN'])\"\n")

PROBE = """
import json, urllib.request, urllib.error
base, run_id, mlflow_run, exp = {base!r}, {run_id!r}, {mlflow_run!r}, {exp!r}
art = base + "/api/2.0/mlflow-artifacts/artifacts/" + exp + "/" + mlflow_run + "/artifacts/"
probes = {{
    "health": ("GET", base + "/health", None),
    "runs": ("GET", base + "/api/air/runs", None),
    "run": ("GET", base + "/api/air/runs/" + run_id, None),
    "logs": ("GET", base + "/api/air/runs/" + run_id + "/logs?node=0", None),
    "mlflow read": ("GET", base + "/api/2.0/mlflow/runs/get?run_id=" + mlflow_run, None),
    "mlflow search": ("POST", base + "/api/2.0/mlflow/runs/search", {{"experiment_ids": [exp]}}),
    "mlflow write": ("POST", base + "/api/2.0/mlflow/experiments/create", {{"name": "intruder"}}),
    "mlflow delete": ("POST", base + "/api/2.0/mlflow/experiments/delete",
                      {{"experiment_id": exp}}),
    "run state": ("POST", base + "/api/2.0/mlflow/runs/update",
                  {{"run_id": mlflow_run, "status": "KILLED"}}),
    "artifact read": ("GET", art + "notes.txt", None),
    "artifact list": ("GET", base + "/api/2.0/mlflow-artifacts/artifacts?path=" + exp, None),
    "artifact write": ("PUT", art + "planted.txt", "x"),
    "artifact delete": ("DELETE", art + "notes.txt", None),
    "ui": ("GET", base + "/", None),
    "ui run": ("GET", base + "/runs/" + run_id, None),
    "ui script": ("GET", base + "/static/app.js", None),
    "login page": ("GET", base + "/login", None),
    "login code": ("POST", base + "/api/air/ui-login", {{}}),
    "login": ("POST", base + "/login", {{"code": "0" * 64}}),
    "forged session": ("GET", base + "/api/air/runs", None,
                       {{"X-Air-Session": "v1.9999999999.a.b"}}),
}}
out = {{}}
for name, (method, url, body, *headers) in probes.items():
    data = None if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
    headers = {{"Content-Type": "application/json", **(headers[0] if headers else {{}})}}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            out[name] = [r.status, r.read().decode(errors="replace")]
    except urllib.error.HTTPError as e:
        out[name] = [e.code, e.read().decode(errors="replace")]
for name, path in (("token file", {token_path!r}), ("login file", {login_path!r})):
    try:
        open(path).read()
        out[name] = "read"
    except OSError as e:
        out[name] = type(e).__name__
print(json.dumps(out))
"""


def test_another_user_gets_401_everywhere_while_the_owner_keeps_working(
        air, air_home, tmp_path, monkeypatch, other_user):
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    # The owner's run: its node logs a param, a metric and an artifact with the real mlflow
    # client, which sends the MLFLOW_TRACKING_TOKEN air gives it (redacted from the log).
    spec = write_spec(tmp_path, NODE_LOGS, name="owner-exp", nodes=1,
                      env_variables={"GIT_PYTHON_REFRESH": "quiet"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    log = air("logs", run_id, "--node", 0).stdout
    assert run["state"] == "SUCCEEDED", explain(run, log)
    token = (air_home / "tracking" / "server.token").read_text().strip()
    assert "token [REDACTED]" in log and token not in log
    info = json.loads((air_home / "tracking" / "server.json").read_text())
    base = info["url"]
    status, body, _ = http("GET", f"{base}/api/2.0/mlflow/runs/get?run_id={run['mlflow_run_id']}",
                           token=token)
    tracked = json.loads(body)["run"]
    assert status == 200 and tracked["data"]["params"] == [{"key": "lr", "value": "0.01"}]
    exp = tracked["info"]["experiment_id"]
    # The owner's CLI: `air ui` writes a private login file.
    login_file, login_base, code = ui_login_code(air)
    assert login_base == base and oct(login_file.stat().st_mode & 0o777) == "0o600"

    probe = run_as(other_user, PROBE.format(
        base=base, run_id=str(run_id), mlflow_run=run["mlflow_run_id"], exp=exp,
        token_path=str(air_home / "tracking" / "server.token"), login_path=str(login_file)))
    assert probe.returncode == 0, probe.stderr
    got = json.loads(probe.stdout)
    assert got.pop("token file") == "PermissionError"
    assert got.pop("login file") == "PermissionError"
    # The UI's page files are served to anyone, as they are in web/: they hold no data.
    for name, file in (("ui", "index.html"), ("ui run", "index.html"), ("ui script", "app.js"),
                       ("login page", "index.html")):
        assert got.pop(name) == [200, (WEB / file).read_text()], name
    for name, (status, text) in got.items():
        assert status == 401, (name, status, text)
        assert json.loads(text)["error_code"] == "UNAUTHENTICATED", (name, text)
        for private in ("owner-exp", run["mlflow_run_id"], "from the node", "0.01", token):
            assert private not in text, (name, text)
    # Nothing changed: the experiment, the run's state and its artifact are as they were.
    status, body, _ = http("GET", f"{base}/api/2.0/mlflow/experiments/get?experiment_id={exp}",
                           token=token)
    assert json.loads(body)["experiment"]["lifecycle_stage"] == "active"
    status, body, _ = http("GET", f"{base}/api/2.0/mlflow/experiments/get-by-name"
                                  "?experiment_name=intruder", token=token)
    assert status == 404
    status, body, _ = http("GET", f"{base}/api/2.0/mlflow/runs/get?run_id={run['mlflow_run_id']}",
                           token=token)
    assert json.loads(body)["run"]["info"]["status"] == "FINISHED"
    out = run_mlflow(f"""
        from mlflow import MlflowClient
        c = MlflowClient()
        print(sorted(f.path for f in c.list_artifacts({run["mlflow_run_id"]!r})))
        print(open(c.download_artifacts({run["mlflow_run_id"]!r}, "notes.txt",
                                        {str(tmp_path)!r})).read())
    """, base)
    assert out.stdout.strip().splitlines()[-2:] == ["['notes.txt']", "from the node"]
    # The owner's login code still works after the probes (it was never guessed).
    status, login = redeem_login_code(base, code)
    assert status == 200, login
    status, body, _ = http("GET", f"{base}/api/air/runs/{run_id}",
                           headers={"X-Air-Session": login["session"]})
    assert status == 200 and json.loads(body)["experiment"] == "owner-exp"


def test_login_link_browser_rules_foreign_host_and_no_cors(air, server):
    base = server.url
    _, _, code = ui_login_code(air)
    status, login = redeem_login_code(base, code)
    assert status == 200 and login["expires_in_s"] == 7 * 24 * 3600, login
    assert redeem_login_code(base, code)[0] == 401  # once
    session = {"X-Air-Session": login["session"]}
    status, body, headers = http("GET", base + "/api/air/runs", headers=session)
    assert status == 200 and json.loads(body) == {"runs": []}
    assert "Set-Cookie" not in headers
    # Only as that header: as a cookie (what every port of 127.0.0.1 would get) it is nothing.
    status, _, _ = http("GET", base + "/api/air/runs",
                        headers={"Cookie": "air_session=" + login["session"]})
    assert status == 401
    # A session cannot make login codes: only the token (`air ui`) can.
    status, text, _ = http("POST", base + "/api/air/ui-login", {}, headers=session)
    assert status == 403 and b"not with a browser session" in text, text

    create = base + "/api/2.0/mlflow/experiments/create"
    refused = {
        # What a page on another origin can send: a simple form or no-cors fetch.
        "foreign origin": ("POST", create, {"Origin": "http://evil.example",
                                            "Content-Type": "text/plain"}, 403),
        "form post": ("POST", create, {"Content-Type": "application/x-www-form-urlencoded"}, 415),
        "text post": ("POST", create, {"Content-Type": "text/plain"}, 415),
        "other port": ("POST", create, {"Origin": "http://127.0.0.1:1",
                                        "Content-Type": "application/json"}, 403),
        "cross-site fetch": ("POST", create, {"Sec-Fetch-Site": "cross-site",
                                              "Content-Type": "application/json"}, 403),
        # A link or an <img> cannot write.
        "get write": ("GET", create + "?name=by-get", {}, 405),
        # DNS rebinding: the page's own name, pointed at 127.0.0.1.
        "foreign host": ("GET", base + "/api/air/runs", {"Host": "evil.example"}, 403),
        "preflight": ("OPTIONS", create, {"Origin": "http://evil.example",
                                          "Access-Control-Request-Method": "POST"}, 405),
    }
    for name, (method, url, headers, want) in refused.items():
        body = json.dumps({"name": name}).encode() if method == "POST" else None
        status, text, response_headers = http(method, url, raw=body,
                                              headers={**session, **headers})
        assert status == want, (name, status, text)
        assert "Access-Control-Allow-Origin" not in response_headers, name
    # The same session and origin may write.
    status, text, headers = http("POST", create, {"name": "same-origin"},
                                 headers={**session, "Origin": base})
    assert status == 200, text
    assert "Access-Control-Allow-Origin" not in headers
    status, text, _ = http("POST", base + "/api/2.0/mlflow/experiments/search",
                           {"max_results": 100}, token=server.token)
    names = sorted(e["name"] for e in json.loads(text)["experiments"])
    assert names == ["Default", "same-origin"], names


SLOW_CLIENT = """
import json, socket, sys, time
port, n = {port}, {n}
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /health HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")  # headers never finish
    socks.append(s)
time.sleep(2)
refused = 0
for s in socks:
    s.setblocking(False)
    try:
        if s.recv(4096).startswith(b"HTTP/1.1 429"):
            refused += 1
    except BlockingIOError:
        pass
print(json.dumps({{"opened": n, "refused": refused}}), flush=True)
# Keep the others busy, one header byte a second, until stdin closes.
import select
while not select.select([sys.stdin], [], [], 1)[0]:
    for s in socks:
        try:
            s.send(b"x")
        except OSError:
            pass
"""


def test_deep_json_is_a_400_and_slow_sockets_cannot_stall_the_server(server, other_user):
    base, token = server.url, server.token
    deep = '{"x":' + "[" * 150000 + "]" * 150000 + "}"
    status, text, _ = http("POST", base + "/api/2.0/mlflow/experiments/search", raw=deep.encode(),
                           token=token)
    assert status == 400, text
    assert "nested deeper than 64 levels" in json.loads(text)["message"]
    status, text, _ = http("GET", base + "/health", token=token)
    assert (status, text) == (200, b"OK")
    # A 50 MB body is refused without being held, and the client still hears why.
    huge = b'{"name": "' + b"x" * (50 * MIB) + b'"}'
    status, text, _ = http("POST", base + "/api/2.0/mlflow/experiments/create", raw=huge,
                           token=token)
    assert status == 400 and b"at most 1000000 bytes" in text, (status, text[:300])
    assert rss_kib(server.proc.pid, "VmHWM") < 100 * 1024

    # Another user holds 100 connections that never finish their headers, more than the
    # server's 64 handler threads. One user gets at most 32 at once (the rest hear 429 at
    # once), so the owner is still served.
    port = int(base.rsplit(":", 1)[1])
    slow = subprocess.Popen([SYSTEM_PYTHON, "-c", SLOW_CLIENT.format(port=port, n=100)],
                            user=other_user.pw_uid, group=other_user.pw_gid, extra_groups=[],
                            cwd="/", env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        counts = json.loads(slow.stdout.readline() or "{}")
        for _ in range(3):
            status, text, _ = http("GET", base + "/health", token=token, timeout=30)
            assert (status, text) == (200, b"OK")
            status, text, _ = http("GET", base + "/api/air/runs", token=token, timeout=30)
            assert status == 200
            time.sleep(1)
        assert counts == {"opened": 100, "refused": 68}, (counts, slow.stderr.read()
                                                          if slow.poll() is not None else "")
    finally:
        slow.stdin.close()
        slow.wait(timeout=30)


class Pattern:
    """`size` bytes of a repeating pseudo-random block, streamed; sha256 of what was sent."""

    def __init__(self, size, block=MIB):
        self.size = size
        self.block = hashlib.sha256(b"air").digest() * (block // 32)
        self.sha = hashlib.sha256()

    def __iter__(self):
        left = self.size
        while left > 0:
            chunk = self.block[:min(left, len(self.block))]
            self.sha.update(chunk)
            left -= len(chunk)
            yield chunk


def put_stream(base, token, path, size, chunked=False):
    """(status, body) of a streamed PUT of `size` bytes (Content-Length, or chunked)."""
    hostport = base.split("//", 1)[1]
    conn = httpclient.HTTPConnection(hostport, timeout=300)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"}
    body = Pattern(size)
    if not chunked:
        headers["Content-Length"] = str(size)
    conn.request("PUT", "/api/2.0/mlflow-artifacts/artifacts/" + path, body=iter(body),
                 headers=headers, encode_chunked=chunked)
    resp = conn.getresponse()
    text = resp.read()
    conn.close()
    return resp.status, text, body.sha.hexdigest()


def no_temp_files(root):
    # AtomicFileWriter's temporaries (base/atomic_file.h): ".<name>.tmp.<8 hex>".
    return [p for p in root.rglob("*") if ".tmp." in p.name]


def test_big_uploads_stream_to_disk_and_quotas_give_413(air_home, server):
    base, token = server.url, server.token
    pid = server.proc.pid
    artifacts = air_home / "tracking" / "artifacts"
    before = rss_kib(pid, "VmRSS")
    size = 600 * MIB
    status, text, sent_sha = put_stream(base, token, "1/run/artifacts/big.bin", size)
    assert status == 200, text
    stored = artifacts / "1" / "run" / "artifacts" / "big.bin"
    assert stored.stat().st_size == size
    # Streamed back, and read whole again: the same bytes.
    hostport = base.split("//", 1)[1]
    conn = httpclient.HTTPConnection(hostport, timeout=300)
    conn.request("GET", "/api/2.0/mlflow-artifacts/artifacts/1/run/artifacts/big.bin",
                 headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    got = hashlib.sha256()
    while chunk := resp.read(MIB):
        got.update(chunk)
    conn.close()
    assert resp.status == 200 and got.hexdigest() == sent_sha
    peak = rss_kib(pid, "VmHWM")
    print(f"air server resident memory: {before / 1024:.1f} MiB before, peak "
          f"{peak / 1024:.1f} MiB through a {size // MIB} MB upload and download")
    assert peak < 100 * 1024, peak
    assert http("DELETE", base + "/api/2.0/mlflow-artifacts/artifacts/1/run/artifacts/big.bin",
                token=token)[0] == 200
    assert not stored.exists()

    # Quotas from config.yaml, read at each upload.
    (air_home / "config.yaml").write_text(
        "tracking_server:\n  artifact_max_file_size: 1MiB\n  artifact_max_run_size: 3MiB\n")
    for chunked in (False, True):
        status, text, _ = put_stream(base, token, "1/q/artifacts/too-big.bin", 2 * MIB, chunked)
        assert status == 413, (chunked, text)
        message = json.loads(text)["message"]
        assert "per-file limit of 1.0 MiB" in message and "artifact_max_file_size" in message
        assert str(air_home / "config.yaml") in message
    for i in range(3):
        assert put_stream(base, token, f"1/q/artifacts/part{i}.bin", MIB)[0] == 200
    assert put_stream(base, token, "1/q/artifacts/part0.bin", MIB)[0] == 200  # a replacement
    status, text, _ = put_stream(base, token, "1/q/artifacts/one-more.bin", 1024)
    assert status == 413, text
    assert "per-run limit of 3.0 MiB" in json.loads(text)["message"]
    assert put_stream(base, token, "1/other-run/artifacts/x.bin", 1024)[0] == 200
    assert sorted(p.name for p in (artifacts / "1" / "q" / "artifacts").iterdir()) == \
        ["part0.bin", "part1.bin", "part2.bin"]
    assert no_temp_files(artifacts) == []
    # Through the real mlflow client: its error carries the server's reason.
    big = air_home.parent / "big.bin"
    big.write_bytes(b"\0" * (2 * MIB))
    out = run_mlflow(f"""
        import mlflow
        from mlflow import MlflowClient
        c = MlflowClient()
        run = c.create_run(c.create_experiment("quota")).info.run_id
        try:
            c.log_artifact(run, {str(big)!r})
            print("uploaded")
        except Exception as e:
            print("refused:", str(e).replace("\\n", " "))
    """, base)
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("refused:") and "413" in last and "per-file limit" in last, last


def test_symlinks_under_the_artifact_root_are_never_followed(air_home, server, tmp_path):
    base, token = server.url, server.token
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text("root:secret-hash:19000:0:99999:7:::\n")
    run_dir = air_home / "tracking" / "artifacts" / "1" / "r1" / "artifacts"
    run_dir.mkdir(parents=True)
    (run_dir / "ok.txt").write_text("fine")
    (run_dir / "shadow").symlink_to(outside / "shadow")  # a file link
    (run_dir / "etc").symlink_to(outside)  # a directory link
    (air_home / "tracking" / "artifacts" / "2").symlink_to(outside)  # a link near the top
    art = base + "/api/2.0/mlflow-artifacts/artifacts/"
    for method, path, body in [("GET", "1/r1/artifacts/shadow", None),
                               ("GET", "1/r1/artifacts/etc/shadow", None),
                               ("GET", "2/shadow", None),
                               ("PUT", "1/r1/artifacts/etc/planted.txt", b"x"),
                               ("PUT", "2/r/artifacts/planted.txt", b"x"),
                               ("DELETE", "1/r1/artifacts/etc/shadow", None)]:
        status, text, _ = http(method, art + path, raw=body, token=token,
                               headers={"Content-Type": "application/octet-stream"})
        assert status == 400, (method, path, status, text)
        assert b"symbolic link" in text and b"secret-hash" not in text, (method, path, text)
    for listing in ("1/r1/artifacts/etc", "2"):
        status, text, _ = http("GET", art.rstrip("/") + "?path=" + listing, token=token)
        assert status == 400 and b"symbolic link" in text, (listing, text)
    status, text, _ = http("GET", art.rstrip("/") + "?path=1/r1/artifacts", token=token)
    assert json.loads(text) == {"files": [{"path": "ok.txt", "is_dir": False, "file_size": 4}]}
    assert sorted(p.name for p in outside.iterdir()) == ["shadow"]
    # Deleting the link removes the link, never what it points at.
    assert http("DELETE", art + "1/r1/artifacts/etc", token=token)[0] == 200
    assert not (run_dir / "etc").exists() and (outside / "shadow").exists()
