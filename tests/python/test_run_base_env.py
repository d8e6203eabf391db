"""Base environments and the node's PATH (docs/node-environment.md): `environment.version`
names a base environment air defines (built once under AIR_HOME/envs/base-<version>-<key>),
`dependencies` layer on top in the run's own venv, every console script a command calls
(torchrun, accelerate, hf) runs the run's interpreter, PATH starts with the run's environment
and never with air's own directory, and AIR_BIN names air. Offline: PIP_NO_INDEX=1, the
project venv already holds the base's pins and the dependency is a local wheel."""
import os
import pathlib
import shutil
import sys

from runtime_jobs.helpers import submit, wait_terminal, write_spec
from test_run_env import build_wheel

JOB = pathlib.Path(__file__).parent / "runtime_jobs" / "uses_dependency"
TORCHRUN = ("torchrun --nnodes=$NUM_NODES --node_rank=$NODE_RANK --nproc_per_node=1 "
            "--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT job.py")


def test_console_scripts_and_path_use_the_runs_environment(air, air_home, tmp_path, monkeypatch):
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    code = tmp_path / "code"
    shutil.copytree(JOB, code)
    wheel = build_wheel(tmp_path)
    command = ('echo "PATH=$PATH"; echo "AIR_BIN=$AIR_BIN"; "$AIR_BIN" version > /dev/null && '
               'echo air-ok; echo "which python3=$(command -v python3)"; '
               'for s in torchrun accelerate hf; do '
               'p=$(command -v $s); echo "which $s=$p shebang=$(head -n 1 $p)"; done; '
               + TORCHRUN)
    spec = write_spec(tmp_path, command, nodes=1, env_variables={"OMP_NUM_THREADS": "1"},
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      environment={"version": "4", "dependencies": [str(wheel)]})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=300)
    logs = air("logs", run_id).stdout
    setup = (air_home / "runs" / str(run_id) / "setup.log").read_text()
    assert run["state"] == "SUCCEEDED", (run, logs, setup[-3000:])
    envs = {p.name: p for p in (air_home / "envs").iterdir() if p.is_dir()}
    base = [p for n, p in envs.items() if n.startswith("base-4-")]
    own = [p for n, p in envs.items() if not n.startswith("base-")]
    assert len(base) == 1 and len(own) == 1, envs
    env_bin = own[0] / "bin"
    # torchrun ran the run's interpreter, which sees the dependency.
    assert f"rank 0 imported airtestpkg 42 with {env_bin}/python" in logs, logs
    for script in ("python3", "torchrun", "accelerate", "hf"):
        line = next(l for l in logs.splitlines() if f"which {script}=" in l)
        assert f"which {script}={env_bin}/{script}" in line, line
        if script != "python3":
            assert f"shebang=#!{env_bin}/python" in line, line
    path_line = next(l for l in logs.splitlines() if "PATH=" in l and "AIR_BIN" not in l)
    path = path_line.split("PATH=", 1)[1].split(":")
    assert path[0] == str(env_bin), path
    air_dir = os.path.dirname(os.path.abspath(air.binary))
    assert path[-1] == air_dir, path  # air's own directory comes last
    assert f"AIR_BIN={os.path.abspath(air.binary)}" in logs and "air-ok" in logs

    # The next run with another dependency list reuses the base environment.
    other = write_spec(tmp_path, "python3 -c 'import torch, yaml, mlflow; print(\"ok\")'",
                       nodes=1, filename="other.yaml",
                       environment={"version": "4", "dependencies": [str(wheel), "pyyaml"]})
    second = submit(air, other)
    assert wait_terminal(air, second, timeout=300)["state"] == "SUCCEEDED"
    setup2 = (air_home / "runs" / str(second) / "setup.log").read_text()
    assert f"reusing Python environment {base[0]}" in setup2, setup2


def test_unknown_base_environment_lists_the_known_ones(air, air_home, tmp_path):
    spec = write_spec(tmp_path, "true", nodes=1,
                      environment={"version": "9", "dependencies": ["numpy"]})
    for args in (("run", "-f", spec, "--dry-run"), ("run", "-f", spec)):
        code, out = air.json(*args)
        assert code == 2, out
        message = str(out["error"])
        assert "environment.version" in message and "'9'" in message, message
        assert "known versions: '4'" in message, message
    assert not (air_home / "envs").exists()
