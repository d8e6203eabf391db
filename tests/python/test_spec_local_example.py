"""The local example's command runs for real with the environment the dry-run plan gives each
node: two simulated nodes, each `bash -c COMMAND` with torchrun, 2 CPU workers per node, gloo.
This checks the node-environment contract and examples/local_cpu end to end without the
runtime: placeholders are filled the way a launcher fills them (a free port, 127.0.0.1, the
code directory, a parameters file)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from runtime_jobs.helpers import free_port

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "local_cpu"


def test_local_example_runs_on_two_simulated_nodes(air, air_home, tmp_path):
    import torch  # noqa: F401 (a missing reference fails, never skips)
    out_dir = tmp_path / "out"
    rc, env = air.json("run", "-f", EXAMPLE / "train.yaml", "--dry-run",
                       "--override", f"parameters.output_dir={out_dir}")
    assert rc == 0, env
    plan = env["data"]
    code = tmp_path / "code"
    shutil.copytree(EXAMPLE, code)
    params = tmp_path / "parameters.yaml"
    params.write_text(plan["parameters_yaml"])
    filled = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
              "CODE_SOURCE_PATH": str(code), "HYPERPARAMETERS_PATH": str(params),
              "MLFLOW_RUN_ID": "test-mlflow", "AIR_RUN_ID": "test-run"}
    procs = []
    for node in plan["nodes"]:
        node_env = dict(os.environ)
        node_env["PATH"] = str(pathlib.Path(sys.executable).parent) + os.pathsep + node_env["PATH"]
        for var in node["env"]:
            name, value = var["name"], var["value"]
            node_env[name] = filled.get(name, value) if value == "<assigned at launch>" else value
        assert "<assigned at launch>" not in node_env.values()
        procs.append(subprocess.Popen(["bash", "-c", plan["command"]], env=node_env,
                                      cwd=tmp_path, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=180)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out
    seen = [json.loads(f.read_text()) for f in sorted((out_dir / "test-run").glob("rank_*.json"))]
    assert [s["rank"] for s in seen] == [0, 1, 2, 3]
    assert all(s["sum"] == 6 and s["world_size"] == 4 and s["num_nodes"] == 2 for s in seen)
    assert sorted((s["node_rank"], s["local_rank"]) for s in seen) == [(0, 0), (0, 1), (1, 0),
                                                                       (1, 1)]
    assert "all_reduce sum = 6" in outputs[1]
