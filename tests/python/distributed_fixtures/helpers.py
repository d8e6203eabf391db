"""Shared pieces of the @distributed tests: the repository's python/ package on sys.path (the
tests exercise the working tree, not an installed copy), and a fixture that points the package
at the test's air binary and AIR_HOME and runs each test from its own working directory (which
becomes the call's code snapshot)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
PYTHON_DIR = REPO / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture
def py_env(air_bin, air_home, tmp_path, monkeypatch):
    """AIR_BIN set, PYTHONPATH holding python/ (for subprocesses and kernels), cwd = a fresh
    work directory; yields that directory."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("AIR_BIN", air_bin)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(PYTHON_DIR)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    monkeypatch.setenv("AIR_STOP_GRACE_SECONDS", "3")
    monkeypatch.chdir(work)
    return work


def air_json(air_bin: str, *args) -> dict:
    proc = subprocess.run([air_bin, "-o", "json", *map(str, args)], capture_output=True,
                          text=True, timeout=120)
    envelope = json.loads(proc.stdout.splitlines()[-1])
    assert "data" in envelope, envelope
    return envelope["data"]


def runs_in(air_bin: str, air_home: pathlib.Path) -> list:
    """Every run the store holds (none when the store was never created)."""
    if not (air_home / "air.db").exists():
        return []
    return air_json(air_bin, "list", "--all-status")["runs"]


def call_dirs(air_home: pathlib.Path) -> list:
    root = air_home / "python-calls"
    return sorted(root.iterdir()) if root.exists() else []
