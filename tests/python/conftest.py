"""Shared pytest fixtures: the air binary, an isolated AIR_HOME, and a runner for the CLI.

Tests run with the project venv's Python (scripts/test.sh), so torch, transformers and
tokenizers are importable as numerical references. AIR_BIN points at build/bin/air.
"""
import json
import os
import pathlib
import signal
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def air_bin() -> str:
    path = os.environ.get("AIR_BIN", str(REPO / "build" / "bin" / "air"))
    if not os.path.exists(path):
        pytest.fail(f"air binary not found at {path}; run scripts/setup.sh")
    return path


@pytest.fixture
def air_home(tmp_path, monkeypatch):
    """A fresh AIR_HOME per test, exported to every air command the test runs."""
    home = tmp_path / "air_home"
    home.mkdir()
    monkeypatch.setenv("AIR_HOME", str(home))
    yield home
    stop_tracking_server(home)


def stop_tracking_server(home: pathlib.Path) -> None:
    """Stops the `air server` that `air run` may have started for this AIR_HOME."""
    info = home / "tracking" / "server.json"
    try:
        pid = json.loads(info.read_text())["pid"]
        cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"server" in cmdline and str(home).encode() in cmdline:  # not a reused pid
            os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, KeyError):
        pass


class AirRunner:
    def __init__(self, binary: str):
        self.binary = binary

    def __call__(self, *args, input=None, timeout=120, env=None, cwd=None, check=False):
        proc = subprocess.run([self.binary, *map(str, args)], input=input, capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=cwd)
        if check and proc.returncode != 0:
            raise AssertionError(f"air {' '.join(map(str, args))} exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def json(self, *args, **kw):
        """Runs `air -o json ARGS` and returns (returncode, parsed envelope)."""
        proc = self("-o", "json", *args, **kw)
        return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def air(air_bin, air_home) -> AirRunner:
    return AirRunner(air_bin)


@pytest.fixture(scope="session")
def dump_bin() -> str:
    """AIR_ENGINE_DUMP, else air_engine_dump beside AIR_BIN (default build/bin)."""
    air_bin = pathlib.Path(os.environ.get("AIR_BIN", str(REPO / "build" / "bin" / "air")))
    path = os.environ.get("AIR_ENGINE_DUMP", str(air_bin.parent / "air_engine_dump"))
    if not os.path.exists(path):
        pytest.fail(f"air_engine_dump not found at {path}; build the air_engine_dump target")
    return path
