"""The quickstart, shortened: `air model init` makes the tiny Llama of examples/quickstart/
model.yaml, `air train --config examples/quickstart/train_config.yaml` fine-tunes it for 150
steps at a higher learning rate (instead of the full run, about 1 of its 12 epochs) on the shipped
instruction set, and the run must show learning: the logged loss falls to less than half, and on
the held-out split the generations go from rambling until the token limit to short answers that
end with the end-of-turn token. (The full run and its held-out accuracy are recorded in
docs/engine-training.md.)
"""
import json
import pathlib

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
EVAL = REPO / "examples" / "data" / "tiny_instruct" / "eval.jsonl"


def test_the_workload_and_the_config_file_hold_the_same_recipe():
    """examples/quickstart/train.yaml (air run) and train_config.yaml (air train --config) must
    train the same way; only the paths differ (the workload runs inside its snapshot), and the
    workload splits the same global batch over its nodes (one rank each)."""
    spec = yaml.safe_load((REPO / "examples/quickstart/train.yaml").read_text())
    workload = spec["parameters"]
    config = yaml.safe_load((REPO / "examples/quickstart/train_config.yaml").read_text())
    ranks = spec["compute"]["num_accelerators"]
    assert spec["compute"]["accelerator_type"] == "CPU_1" and ranks == 2
    assert workload.pop("per_device_batch_size") * ranks == config.pop("per_device_batch_size")
    assert workload.pop("fsdp_sharding_strategy") == "FULL_SHARD"
    paths = {"model_name", "dataset_name", "output_dir"}
    defaults = {"save_steps": 0, "bf16": False, "activation_checkpointing": False}
    for key in (workload.keys() | config.keys()) - paths:
        assert workload.get(key, defaults.get(key)) == config.get(key, defaults.get(key)), key
    assert workload["dataset_name"] in config["dataset_name"]


def held_out(air, model_dir):
    code, env = air.json("generate", "--model", model_dir, "--dataset", EVAL, "--limit", 24,
                         "--max-new-tokens", 16, "--threads", 2, cwd=REPO)
    assert code == 0, env
    return env["data"]


def test_quickstart_loss_falls_and_generations_improve(air, tmp_path):
    model_dir = tmp_path / "model"
    air("model", "init", "--config", REPO / "examples/quickstart/model.yaml", "--out", model_dir,
        "--tokenizer", REPO / "examples/data/tiny_instruct/tokenizer", check=True)
    before = held_out(air, model_dir)

    out = tmp_path / "trained"
    proc = air("train", "--config", "examples/quickstart/train_config.yaml",
               "--set", f"model_name={model_dir}", "--set", f"output_dir={out}",
               "--set", "max_steps=150", "--set", "learning_rate=0.003", "--set", "logging_steps=5",
               "--threads", 2,
               cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(5, 151, 5))
    first, last = metrics[0]["loss"], metrics[-1]["loss"]
    assert last < 0.5 * first, [round(m["loss"], 3) for m in metrics]

    after = held_out(air, out)
    assert after["stopped_at_eos"] >= 18, after["results"]  # of 24: answers that end
    assert after["stopped_at_eos"] >= before["stopped_at_eos"] + 12
    assert after["exact_match"] >= before["exact_match"]
