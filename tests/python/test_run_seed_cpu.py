"""The first seed, as a user would run it on a CPU host: examples/multinode_llm_sft/train.yaml
unchanged except for the CPU shape, a CPU variant of its script (gloo, tiny model: no GPU, no
network) and, as in the issue, `mlflow-skinny` added to its dependencies. Its
`environment.version: '4'` base environment brings torch, mlflow and pyyaml (the spec lists only
extras), torchrun resolves to the run's environment, and the checkpoint its `output_dir`
parameter names under /Volumes/main/default/air_checkpoints/ is there after the run: on the host
through `air volumes ls`, never in the host's /Volumes."""
import os
import pathlib
import shutil
import sys

import yaml

from runtime_jobs.helpers import assert_no_processes_left, submit, wait_terminal

REPO = pathlib.Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "multinode_llm_sft"
CPU_SCRIPT = pathlib.Path(__file__).parent / "runtime_jobs" / "seed_sft_cpu" / "train_cpu.py"
OUTPUT_DIR = "/Volumes/main/default/air_checkpoints/llama31-8b-sft"


def test_seed_train_yaml_writes_its_checkpoint_to_a_volume(air, air_home, tmp_path, monkeypatch):
    # The interpreter that builds the base environment: the project venv, which already has
    # every pinned package of base environment '4', so pip installs nothing.
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    host_had_volumes = os.path.exists("/Volumes") and os.listdir("/Volumes")
    code = tmp_path / "multinode_llm_sft"
    shutil.copytree(SEED, code)
    shutil.copy(CPU_SCRIPT, code / "train_cpu.py")
    spec = yaml.safe_load((code / "train.yaml").read_text())
    assert spec["parameters"]["output_dir"] == OUTPUT_DIR
    assert spec["environment"]["version"] == "4"
    spec["compute"] = {"num_accelerators": 2, "accelerator_type": "CPU_1"}
    spec["command"] = spec["command"].replace("train.py", "train_cpu.py")
    spec["environment"]["dependencies"].append("mlflow-skinny==3.17.2")
    spec["parameters"].update(max_steps=3, max_seq_len=16, per_device_batch_size=2)
    spec["env_variables"]["OMP_NUM_THREADS"] = "1"
    (code / "train.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    air("secrets", "create-scope", "my_scope", check=True)
    air("secrets", "put-secret", "my_scope", "hf_token", input="hf_not_a_real_token", check=True)

    run_id = submit(air, code / "train.yaml")
    run = wait_terminal(air, run_id, timeout=600)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    setup = (air_home / "runs" / str(run_id) / "setup.log").read_text()
    assert run["state"] == "SUCCEEDED", (run, logs, setup[-3000:])
    assert "step=3/3" in logs[0] and f"Saved checkpoint to {OUTPUT_DIR}" in logs[0]
    # Base environment '4' was built, then the run's dependencies layered on it.
    envs = sorted(p.name for p in (air_home / "envs").iterdir() if p.is_dir())
    assert len(envs) == 2 and sum(e.startswith("base-4-") for e in envs) == 1, envs

    volume = air_home / "volumes" / "main" / "default" / "air_checkpoints" / "llama31-8b-sft"
    assert (volume / "config.json").is_file() and (volume / "model.safetensors").is_file()
    code_, listing = air.json("volumes", "ls", OUTPUT_DIR)
    assert code_ == 0, listing
    names = {e["name"]: e for e in listing["data"]["entries"]}
    assert names["model.safetensors"]["type"] == "file"
    assert names["model.safetensors"]["size"] == (volume / "model.safetensors").stat().st_size
    text = air("volumes", "ls", "-r", "/Volumes/main/default", check=True).stdout
    assert f"{OUTPUT_DIR}/model.safetensors" in text
    # Nothing reached the host's /Volumes (at most the empty mount point exists).
    if not host_had_volumes:
        assert not os.path.exists("/Volumes") or os.listdir("/Volumes") == []
    assert_no_processes_left(air_home, run)
