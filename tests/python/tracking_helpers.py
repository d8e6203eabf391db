"""Helpers for the tracking tests: start `air server` (foreground, ephemeral port) and run a
Python snippet with the real mlflow client against it. Every request to an air server needs its
token (AIR_HOME/tracking/server.token), loopback included: the snippet gets it as
MLFLOW_TRACKING_TOKEN, as an air run's nodes do."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request


class AirServer:
    """`air server` on an ephemeral port; stop() sends SIGTERM and waits."""

    def __init__(self, air_bin, air_home, *extra):
        env = dict(os.environ, AIR_HOME=str(air_home))
        self.proc = subprocess.Popen([air_bin, "-o", "json", "server", *extra], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"air server did not start: {self.proc.stderr.read()}")
        self.info = json.loads(line)["data"]
        self.url = self.info["url"]
        self.token = server_token(air_home)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        return self.proc.returncode


def server_token(air_home=None):
    """The token of AIR_HOME's air server (default $AIR_HOME), or None when it has none yet."""
    home = air_home or os.environ.get("AIR_HOME")
    path = pathlib.Path(home) / "tracking" / "server.token" if home else None
    return path.read_text().strip() if path and path.exists() else None


def http(method, url, body=None, token=None, raw=None, headers=None, timeout=30):
    """(status, body bytes, response headers) of one request; JSON bodies by default."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    all_headers = {"Content-Type": "application/json"}
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    all_headers.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={k: v for k, v in all_headers.items() if v is not None})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def ui_login_code(air):
    """`air ui --url-only`'s private login file, read as its owner: (file path, server URL,
    one-time code) from the address the file redirects to (<server>/login#code=<code>)."""
    file_url = air("ui", "--url-only", check=True).stdout.strip()
    assert file_url.startswith("file://"), file_url
    path = pathlib.Path(urllib.parse.unquote(file_url[len("file://"):]))
    found = re.search(r'url=(http://[^"#]+)/login#code=([0-9a-f]{64})"', path.read_text())
    assert found, path.read_text()
    return path, found.group(1), found.group(2)


def redeem_login_code(base, code):
    """What the UI's /login page does with the code: (status, JSON body of POST /login)."""
    status, body, _ = http("POST", base + "/login", {"code": code})
    return status, json.loads(body)


def run_mlflow(code, tracking_uri, timeout=300, env=None, check=True):
    """Runs `code` in a fresh interpreter with MLFLOW_TRACKING_URI set; returns stdout. Unless
    `env` names credentials, the client sends $AIR_HOME's server token."""
    full_env = dict(os.environ, MLFLOW_TRACKING_URI=tracking_uri,
                    GIT_PYTHON_REFRESH="quiet", MLFLOW_ENABLE_ASYNC_LOGGING="false",
                    NO_PROXY="*")
    full_env.pop("MLFLOW_TRACKING_TOKEN", None)
    if not any(k.startswith("MLFLOW_TRACKING_") and k != "MLFLOW_TRACKING_URI"
               for k in (env or {})):
        token = server_token()
        if token:
            full_env["MLFLOW_TRACKING_TOKEN"] = token
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"mlflow snippet failed ({proc.returncode}):\n{proc.stdout}\n"
                             f"{proc.stderr[-4000:]}")
    return proc
