"""`air run --override FIELD=VALUE`: change a value, add one, unknown fields, invalid results."""
import pathlib

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
SEED = REPO / "examples" / "multinode_llm_sft" / "train.yaml"


def test_change_a_value(air, air_home):
    proc = air("run", "-f", SEED, "--dry-run", "--override", "max_retries=0",
               "--override", "compute.num_accelerators=8")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("override max_retries: 1 -> 0\n"
                                  "override compute.num_accelerators: 16 -> 8\n")
    assert "1 node \u00d7 8 GPUs (GPU_8xH100)" in proc.stdout
    assert "  retries      0 (at most 1 attempt;" in proc.stdout
    assert list(air_home.iterdir()) == []


def test_add_values(air, air_home):
    rc, env = air.json("run", "-f", SEED, "--dry-run", "--override", "env_variables.FOO=bar",
                       "--override", "parameters.learning_rate=1e-4",
                       "--override", "parameters.warmup_ratio=0.03")
    assert rc == 0
    plan = env["data"]
    assert plan["overrides"] == [
        {"field": "env_variables.FOO", "before": "(unset)", "after": "bar"},
        {"field": "parameters.learning_rate", "before": "0.00002", "after": "1e-4"},
        {"field": "parameters.warmup_ratio", "before": "(unset)", "after": "0.03"},
    ]
    assert {"name": "FOO", "value": "bar", "secret": False} in plan["nodes"][0]["env"]
    params = yaml.safe_load(plan["parameters_yaml"])
    assert params["warmup_ratio"] == 0.03
    assert params["max_seq_len"] == 1024
    assert "learning_rate: 1e-4\n" in plan["parameters_yaml"]
    proc = air("run", "-f", SEED, "--dry-run", "--override", "env_variables.FOO=bar")
    assert proc.stdout.startswith("override env_variables.FOO: (unset) -> bar\n")
    assert "  FOO=bar\n" in proc.stdout


def test_unknown_field_lists_valid_ones(air, air_home):
    proc = air("run", "-f", SEED, "--dry-run", "--override", "max_retry=0")
    assert proc.returncode == 2
    line = proc.stderr.splitlines()[0]
    assert line.startswith(f"{SEED}: --override max_retry=0: max_retry: unknown field 'max_retry' "
                           "(did you mean 'max_retries'?); valid fields: experiment_name, ")
    for field in ["compute.num_accelerators", "env_variables.NAME", "parameters.KEY[.KEY...]",
                  "timeout_minutes"]:
        assert field in line
    assert list(air_home.iterdir()) == []


def test_invalid_result_is_revalidated(air, air_home):
    proc = air("run", "-f", SEED, "--dry-run", "--override", "compute.num_accelerators=12",
               "--override", "secrets.HF_HOME=a/b")
    assert proc.returncode == 2
    assert proc.stdout.startswith("override compute.num_accelerators: 16 -> 12\n")
    errors = [l for l in proc.stderr.splitlines() if l.startswith(f"{SEED}: --override")]
    assert errors == [
        f"{SEED}: --override compute.num_accelerators=12: compute.num_accelerators: 12 is not a multiple "
        "of 8, the GPUs per node of GPU_8xH100; use 8 or 16",
        f"{SEED}: --override secrets.HF_HOME=a/b: secrets.HF_HOME: HF_HOME is also set in env_variables "
        "(line 38); a name may appear in only one of env_variables and secrets",
    ]
    rc, env = air.json("run", "-f", SEED, "--dry-run", "--override", "timeout_minutes=soon")
    assert rc == 2
    assert env["error"]["errors"] == [{
        "file": str(SEED), "line": 0, "column": 0, "field": "timeout_minutes",
        "message": "expected an integer, got 'soon'", "origin": "--override timeout_minutes=soon"}]
    assert env["error"]["overrides"] == [
        {"field": "timeout_minutes", "before": "120", "after": "soon"}]
    assert list(air_home.iterdir()) == []


def test_without_dry_run_an_invalid_spec_creates_nothing(air, tmp_path):
    import os
    home = tmp_path / "home"
    proc = air("run", "-f", SEED, "--override", "max_retries=-5",
               env={**os.environ, "AIR_HOME": str(home)})
    assert proc.returncode == 2
    assert not home.exists()
