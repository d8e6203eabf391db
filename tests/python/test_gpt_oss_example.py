"""examples/gpt_oss_lora/: the second seed's recipe with `air train`, run as a user would.

- model.yaml + train_config.yaml: `air model init` writes the tiny GPT-OSS with gpt-oss's
  tokenizer (o200k_harmony and the model's chat template, built offline by
  engine_ref/gpt_oss_tokenizer.py), and `air train --config` trains it in bf16 with the seed's
  hyperparameters on data.jsonl (Multilingual-Thinking-shaped records, rendered in the harmony
  format) with LoRA on (r 16, alpha 16, dropout 0.05, all-linear) — shortened to 2 optimizer
  steps here; PEFT loads the adapter it writes.
- The memory check of the 120B shape: `air train --dry-run` with the released config
  (tests/data/gpt_oss/configs/released_120b.json) on 8 ranks prints the parameter count —
  equal to transformers' GptOssForCausalLM built from that config on the meta device — and the
  bytes each rank holds.
- train_air.yaml validates as an `air run` workload and carries train_config.yaml's
  hyperparameters.
"""
import json
import os
import pathlib

import peft
import pytest
import torch  # a missing reference fails, never skips
import transformers  # a missing reference fails, never skips
import yaml

from engine_ref import gpt_oss_tokenizer

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "gpt_oss_lora"
RELEASED_120B = REPO / "tests" / "data" / "gpt_oss" / "configs" / "released_120b.json"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpt_oss_example_tokenizer")
    out = root / "tokenizer"
    gpt_oss_tokenizer.make_tokenizer_dir(out, root / "tiktoken",
                                         gpt_oss_tokenizer.trl_template("gptoss.jinja"))
    return out


def test_tiny_gpt_oss_trains_with_the_seed_recipe(air, tokenizer_dir, tmp_path):
    model = tmp_path / "model"
    air("model", "init", "--config", EXAMPLE / "model.yaml", "--out", model, "--tokenizer",
        tokenizer_dir, "--seed", 0, check=True, cwd=REPO)
    out = tmp_path / "trained"
    proc = air("train", "--config", EXAMPLE / "train_config.yaml", "--set", f"model_name={model}",
               "--set", f"output_dir={out}", "--set", "max_steps=2", "--threads", 2,
               timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(proc.stdout)
    assert "bf16 mixed precision" in proc.stdout
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(0 < m["loss"] < 20 for m in metrics), metrics
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 16 and adapter["lora_alpha"] == 16 and adapter["lora_dropout"] == 0.05
    assert sorted({m.rsplit(".", 1)[-1] for m in adapter["target_modules"]}) == [
        "k_proj", "o_proj", "q_proj", "v_proj"]
    base = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    trained = peft.PeftModel.from_pretrained(base, out)
    # 2 layers x r 16 x (q and o: 64 + 64; k and v: 64 + 32)
    assert sum(p.numel() for n, p in trained.named_parameters() if "lora_" in n) == 2 * 16 * (
        2 * (64 + 64) + 2 * (64 + 32))


def test_memory_check_prints_what_the_120b_shape_needs_on_8_ranks(air, tokenizer_dir, tmp_path):
    model = tmp_path / "gpt-oss-120b"
    model.mkdir()
    (model / "config.json").write_text(RELEASED_120B.read_text())
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (model / name).write_text((tokenizer_dir / name).read_text(encoding="utf-8"),
                                  encoding="utf-8")
    ranks = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": "0",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    code, env = air.json("train", "--config", EXAMPLE / "train_config.yaml", "--set",
                         f"model_name={model}", "--set", f"output_dir={tmp_path / 'out'}",
                         "--dry-run", env=dict(os.environ, **ranks), cwd=REPO)
    assert code == 0, env
    memory = env["data"]["memory"]
    config = transformers.GptOssConfig.from_dict(json.loads(RELEASED_120B.read_text()))
    config.quantization_config = None
    with torch.device("meta"):
        reference = transformers.GptOssForCausalLM(config)
    count = sum(p.numel() for p in reference.parameters())
    lora = peft.get_peft_model(reference, peft.LoraConfig(
        r=16, lora_alpha=16, target_modules="all-linear", lora_dropout=0.05, bias="none",
        task_type="CAUSAL_LM"))
    adapters = sum(p.numel() for n, p in lora.named_parameters() if "lora_" in n)
    print(f"\n[gpt-oss 120B] {memory['parameters'] / 1e9:.4g} B parameters (transformers "
          f"{count / 1e9:.4g} B), LoRA r 16 adapters {adapters / 1e6:.4g} M; per rank on 8 ranks: "
          f"{memory['bytes_per_rank'] / 2**30:.1f} GiB for {memory['what']}")
    assert memory["parameters"] == count
    assert "FULL_SHARD over 8 ranks" in memory["what"]
    # The frozen base in bf16 (2 bytes) and the adapters' fp32 masters, gradients and both AdamW
    # moments (16 bytes), all sharded 8 ways (FULL_SHARD keeps no whole copy).
    assert memory["bytes_per_rank"] == pytest.approx((count * 2 + adapters * 16) / 8)


def test_workload_validates_and_carries_the_recipe(air):
    workload = yaml.safe_load((EXAMPLE / "train_air.yaml").read_text())
    recipe = yaml.safe_load((EXAMPLE / "train_config.yaml").read_text())
    for key in ("max_length", "per_device_batch_size", "gradient_accumulation_steps",
                "learning_rate", "lr_scheduler_type", "warmup_ratio", "bf16",
                "activation_checkpointing", "fsdp_sharding_strategy", "train_on_prompt"):
        assert workload["parameters"][key] == recipe[key], key
    proc = air("run", "-f", EXAMPLE / "train_air.yaml", "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
