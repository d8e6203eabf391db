"""`air run --dry-run` on the seed's workload and on the local example: the file passes
unchanged, the plan shows the node shape and the per-node environment, nothing is created."""
import os
import pathlib
import shutil
import subprocess

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
SEED_EXAMPLE = REPO / "examples" / "multinode_llm_sft" / "train.yaml"

# The workload YAML of the first seed (../shared/seeds/000_*.txt), verbatim.
SEED_TRAIN_YAML = """experiment_name: air-multinode-llama-sft

environment:
  version: '4'
  dependencies:
    - transformers>=4.45
    - datasets>=3.0
    - huggingface_hub>=0.34
    - accelerate>=0.34
    # The base image ships fsspec 2023.5.0, which is too old for modern
    # huggingface_hub and breaks dataset/model downloads. Pin a newer fsspec.
    - fsspec>=2024.6.1

# 16 GPUs across 2 nodes (GPU_8xH100 = 8 H100 per node).
compute:
  num_accelerators: 16
  accelerator_type: GPU_8xH100

code_source:
  type: snapshot
  snapshot:
    root_path: .

command: |
  cd $CODE_SOURCE_PATH
  # air sets NUM_NODES, NODE_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, and MASTER_PORT on each node.
  torchrun \\
    --nnodes="$NUM_NODES" \\
    --node_rank="$NODE_RANK" \\
    --nproc_per_node="${LOCAL_WORLD_SIZE:-8}" \\
    --master_addr="$MASTER_ADDR" \\
    --master_port="$MASTER_PORT" \\
    train.py

# Pin NCCL control-plane traffic to eth0 so cross-node rendezvous works.
env_variables:
  NCCL_SOCKET_IFNAME: eth0
  HF_HOME: /tmp/hf

# Gated model download needs a Hugging Face token. Replace with your own
# Databricks secret in the form "scope/key".
secrets:
  HF_TOKEN: 'my_scope/hf_token'

max_retries: 1
timeout_minutes: 120

# Surfaced to train.py via HYPERPARAMETERS_PATH.
parameters:
  model_name: meta-llama/Llama-3.1-8B
  dataset_name: tatsu-lab/alpaca
  max_seq_len: 1024
  per_device_batch_size: 4
  gradient_accumulation_steps: 2
  learning_rate: 0.00002
  max_steps: 100
  output_dir: /Volumes/main/default/air_checkpoints/llama31-8b-sft
"""

ENV_ORDER = ["NUM_NODES", "NODE_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "MASTER_ADDR",
             "MASTER_PORT", "CODE_SOURCE_PATH", "HYPERPARAMETERS_PATH", "MLFLOW_RUN_ID",
             "MLFLOW_EXPERIMENT_NAME", "AIR_RUN_ID", "AIR_ATTEMPT", "PYTHONUNBUFFERED",
             "NCCL_SOCKET_IFNAME", "HF_HOME", "HF_TOKEN"]


def node_env(node):
    """A node's environment from the JSON plan (an ordered list) as a dict."""
    return {e["name"]: e["value"] for e in node["env"]}


def seeds_candidates():
    """Where the seed documents may be: AIR_SEEDS_DIR, ../shared/seeds beside this checkout, and
    beside the checkout it was cloned from (CI's clean clone: `git clone . /tmp/ci`)."""
    candidates = [os.environ.get("AIR_SEEDS_DIR", ""), str(REPO.parent / "shared" / "seeds")]
    origin = subprocess.run(["git", "-C", str(REPO), "remote", "get-url", "origin"],
                            capture_output=True, text=True)
    if origin.returncode == 0 and os.path.isdir(origin.stdout.strip()):
        candidates.append(str(pathlib.Path(origin.stdout.strip()).resolve().parent / "shared" / "seeds"))
    return [c for c in candidates if c]


def seeds_dir():
    for c in seeds_candidates():
        if list(pathlib.Path(c).glob("000_*.txt")):
            return pathlib.Path(c)
    return None


def test_example_is_the_seed_yaml_byte_for_byte():
    assert SEED_EXAMPLE.read_bytes() == SEED_TRAIN_YAML.encode()
    seeds = seeds_dir()
    assert seeds is not None, (
        "the seed documents (000_*.txt) are the reference this test checks the example against; "
        f"none in {seeds_candidates()}: set AIR_SEEDS_DIR to the directory that holds them")
    seed_text = next(seeds.glob("000_*.txt")).read_text(encoding="utf-8")
    assert SEED_TRAIN_YAML.rstrip("\n") in seed_text


@pytest.fixture
def seed_project(tmp_path):
    """The seed's project layout (train.yaml + train.py) copied to a fresh directory."""
    project = tmp_path / "multinode_llm_sft"
    project.mkdir()
    (project / "train.yaml").write_text(SEED_TRAIN_YAML)
    shutil.copy(REPO / "examples" / "multinode_llm_sft" / "train.py", project / "train.py")
    return project


def test_seed_dry_run_shows_the_plan_and_starts_nothing(air, air_home, seed_project, tmp_path):
    home = tmp_path / "never_created"
    env = {**os.environ, "AIR_HOME": str(home)}
    proc = air("run", "-f", "train.yaml", "--dry-run", cwd=seed_project, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert "  experiment   air-multinode-llama-sft\n" in out
    assert "2 nodes \u00d7 8 GPUs (GPU_8xH100)" in out
    assert "environment of node 0 (of 2):\n" in out
    node0 = out.split("environment of node 0 (of 2):\n")[1].split("environment of node 1")[0]
    names = [line.strip().split("=")[0] for line in node0.strip().splitlines()]
    assert names == ENV_ORDER
    for line in ["NUM_NODES=2", "NODE_RANK=0", "LOCAL_WORLD_SIZE=8", "WORLD_SIZE=16",
                 "MASTER_PORT=<assigned at launch>", "HYPERPARAMETERS_PATH=<assigned at launch>",
                 "PYTHONUNBUFFERED=1", "NCCL_SOCKET_IFNAME=eth0", "HF_HOME=/tmp/hf",
                 "HF_TOKEN=[REDACTED]  (secret my_scope/hf_token, resolved at launch)"]:
        assert f"  {line}\n" in node0, line
    assert "environment of node 1: the same except NODE_RANK=1\n" in out
    assert "snapshot of " + str(seed_project) + " (working tree, .gitignore honored): 2 files" in out
    assert "  retries      1 (at most 2 attempts" in out
    assert "  timeout      120 minutes per attempt" in out
    assert "  torchrun \\\n" in out
    assert out.endswith("dry run: nothing was started\n")
    # Nothing was created, and the workload file is untouched.
    assert not home.exists()
    assert sorted(p.name for p in seed_project.iterdir()) == ["train.py", "train.yaml"]
    assert (seed_project / "train.yaml").read_text() == SEED_TRAIN_YAML
    assert list(air_home.iterdir()) == []


def test_seed_dry_run_json_plan(air, air_home, seed_project):
    rc, env = air.json("run", "-f", seed_project / "train.yaml", "--dry-run")
    assert rc == 0
    assert env["v"] == 1 and "ts" in env
    plan = env["data"]
    assert plan["dry_run"] is True
    assert plan["compute"] == {"accelerator_type": "GPU_8xH100", "num_accelerators": 16,
                               "kind": "gpu", "device_model": "H100", "per_node": 8,
                               "num_nodes": 2, "min_nodes": 2,
                               "description": "2 nodes \u00d7 8 GPUs (GPU_8xH100)"}
    assert [n["node_rank"] for n in plan["nodes"]] == [0, 1]
    assert [e["name"] for e in plan["nodes"][1]["env"]] == ENV_ORDER
    assert node_env(plan["nodes"][1])["NODE_RANK"] == "1"
    assert plan["nodes"][0]["env"][-1] == {"name": "HF_TOKEN", "value": "[REDACTED]",
                                           "secret": True}
    assert plan["secrets"] == [{"name": "HF_TOKEN", "ref": "my_scope/hf_token"}]
    assert plan["code_source"]["files"] == 2
    assert plan["code_source"]["bytes"] == sum(p.stat().st_size for p in seed_project.iterdir())
    assert plan["environment"]["version"] == "4"
    assert plan["max_retries"] == 1 and plan["timeout_minutes"] == 120
    # The parameters file holds the user's block with the same values and types.
    params_text = plan["parameters_yaml"]
    assert "learning_rate: 0.00002\n" in params_text
    assert yaml.safe_load(params_text) == yaml.safe_load(SEED_TRAIN_YAML)["parameters"]
    assert list(air_home.iterdir()) == []


def test_local_example_dry_run(air, air_home):
    rc, env = air.json("run", "-f", REPO / "examples" / "local_cpu" / "train.yaml", "--dry-run")
    assert rc == 0
    plan = env["data"]
    assert plan["compute"]["description"] == "2 nodes \u00d7 2 worker processes (CPU_2)"
    assert node_env(plan["nodes"][0])["LOCAL_WORLD_SIZE"] == "2"
    assert node_env(plan["nodes"][0])["WORLD_SIZE"] == "4"
    assert plan["code_source"]["files"] == 2  # train.yaml and job.py


def test_snapshot_counts_honor_gitignore_and_git_revisions(air, air_home, tmp_path):
    import subprocess
    project = tmp_path / "proj"
    (project / "logs").mkdir(parents=True)
    (project / "train.py").write_text("print('v1')\n")
    (project / "logs" / "old.log").write_text("x" * 1000)
    (project / ".gitignore").write_text("logs/\n")
    (project / "w.yaml").write_text(
        "experiment_name: demo\ncompute: {accelerator_type: CPU_1, num_accelerators: 1}\n"
        "code_source: {type: snapshot, snapshot: {root_path: .}}\ncommand: python train.py\n")
    rc, env = air.json("run", "-f", project / "w.yaml", "--dry-run")
    assert rc == 0
    code = env["data"]["code_source"]
    assert code["files"] == 3  # .gitignore, train.py, w.yaml; logs/ ignored
    assert code["bytes"] == sum((project / n).stat().st_size for n in [".gitignore", "train.py",
                                                                          "w.yaml"])
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run(git + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "train.py"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    rc, env = air.json("run", "-f", project / "w.yaml", "--dry-run",
                       "--override", "code_source.snapshot.git.branch=main")
    assert rc == 0
    assert env["data"]["code_source"]["files"] == 1
    assert len(env["data"]["code_source"]["revision"]) == 40
    proc = air("run", "-f", project / "w.yaml", "--dry-run",
               "--override", "code_source.snapshot.git.branch=mian")
    assert proc.returncode == 2
    assert (f"{project / 'w.yaml'}: --override code_source.snapshot.git.branch=mian: "
            "code_source.snapshot.git.branch: "
            "unknown revision: no branch 'mian'") in proc.stderr
    assert "(did you mean 'main'?)" in proc.stderr
    assert list(air_home.iterdir()) == []


def test_commands_and_environments_past_the_kernels_limits_are_refused_with_their_size(
        air, air_home, tmp_path):
    """A 1 MB command or a 200 KB environment value would pass to every node and fail there at
    exec (E2BIG, "cannot execute the shell"); the dry run and submit both refuse it, naming the
    field and its size, and nothing is created."""
    from runtime_jobs.helpers import write_spec
    big_command = write_spec(tmp_path, "echo " + "x" * (1 << 20), nodes=1, filename="cmd.yaml")
    big_env = write_spec(tmp_path, "true", nodes=1, filename="env.yaml",
                         env_variables={"BLOB": "v" * (200 * 1024), "SMALL": "ok"})
    for spec, field, size in [(big_command, "command", "is 1,048,581 bytes"),
                              (big_env, "env_variables.BLOB", "is 204,800 bytes")]:
        for dry in (["--dry-run"], []):
            rc, out = air.json("run", "-f", spec, *dry)
            assert rc == 2, out
            error = out["error"]
            assert [e["field"] for e in error["errors"]] == [field], error
            message = error["errors"][0]["message"]
            assert size in message and "MAX_ARG_STRLEN" in message, message
            assert error["errors"][0]["line"] > 0
    # Many values that fit one by one, but not together (ARG_MAX).
    many = write_spec(tmp_path, "true", nodes=1, filename="many.yaml",
                      env_variables={f"V{i}": "v" * 100000 for i in range(30)})
    proc = air("run", "-f", many, "--dry-run")
    assert proc.returncode == 2 and "env_variables" in proc.stderr and "ARG_MAX" in proc.stderr
    assert list(air_home.iterdir()) == []
