"""Helpers for the tracking tests: start `air server` (foreground, ephemeral port) and run a
Python snippet with the real mlflow client against it."""
import json
import os
import signal
import subprocess
import sys
import textwrap


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

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        return self.proc.returncode


def run_mlflow(code, tracking_uri, timeout=300, env=None, check=True):
    """Runs `code` in a fresh interpreter with MLFLOW_TRACKING_URI set; returns stdout."""
    full_env = dict(os.environ, MLFLOW_TRACKING_URI=tracking_uri,
                    GIT_PYTHON_REFRESH="quiet", MLFLOW_ENABLE_ASYNC_LOGGING="false",
                    NO_PROXY="*")
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"mlflow snippet failed ({proc.returncode}):\n{proc.stdout}\n"
                             f"{proc.stderr[-4000:]}")
    return proc
