"""LoRA in `air train` beyond one process's parity with PEFT (test_lora_parity.py): bad input,
several ranks, resume, the second seed's settings in bf16 with activation checkpointing.

- Bad input is refused before training (exit 2), naming the key and the file: lora_r <= 0, a
  target module that matches nothing (naming the linear layers that exist), an unknown
  lora_modules_to_save entry, a starting adapter from another base (naming the first tensor
  whose shape differs, or that the model has no place for), LoRA keys without use_peft.
- 2 ranks on every sharding strategy and 4 ranks (2 nodes x 2 under `air run`, the LoRA keys in
  the workload's `parameters:` block, HYBRID_SHARD) train the same adapter as 1 rank: losses and
  adapter weights within 1e-5 (printed). Dropout is 0 there: its masks are drawn per rank.
- SIGKILL after checkpoint-5 and `resume_from_checkpoint: latest` on 2 ranks with dropout 0.05:
  the remaining losses and the final adapter are bit for bit those of an uninterrupted run; the
  resumable state holds the adapter's shards and their AdamW moments only, never the base.
- The second seed's LoraConfig as written (r 16, alpha 16, all-linear, dropout 0.05) with a bf16
  base, FSDP full shard on 2 ranks and activation checkpointing trains (the loss falls), equals the
  same run without checkpointing bit for bit, and its adapter loads in PEFT.
"""
import json
import pathlib
import random
import subprocess
import sys

import pytest
import yaml

import torch  # a missing reference fails, never skips
import transformers
import peft
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, str(pathlib.Path(__file__).parent / "runtime_jobs"))
from helpers import (explain, free_port, sigkill_once_complete, submit,  # noqa: E402
                     wait_terminal, write_spec)
from test_train_bf16 import command, losses, train, write  # noqa: E402
from test_train_cli import make_model, write_pretokenized  # noqa: E402
from test_train_distributed import max_weight_diff  # noqa: E402

STEPS = 12
GLOBAL_ROWS = 4
# The default LoRA of these tests: every linear layer, the head trained whole (frozen and
# trainable parameters side by side in the root unit).
LORA = {"use_peft": True, "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
        "lora_target_modules": "all-linear", "lora_modules_to_save": ["lm_head"]}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    make_model(root / "tiny")
    write_pretokenized(root / "data.jsonl", n=48)
    return root / "tiny", root / "data.jsonl"


def params(tiny, out, world=1, **extra):
    model_dir, data = tiny
    p = {"model_name": str(model_dir), "dataset_name": str(data), "output_dir": str(out),
         "max_seq_len": 64, "per_device_batch_size": GLOBAL_ROWS // world,
         "gradient_accumulation_steps": 2, "learning_rate": 1e-2, "max_steps": STEPS,
         "logging_steps": 1, "warmup_steps": 2, "weight_decay": 0.01, "max_grad_norm": 0.5,
         "seed": 3, **LORA}
    p.update(extra)
    return p


def adapter(out):
    return load_file(str(pathlib.Path(out) / "adapter_model.safetensors"))


def max_rel_loss_diff(a, b):
    assert len(a) == len(b) == STEPS
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


# --- bad input ---------------------------------------------------------------------------------

def peft_adapter(tmp, hidden=32, layers=2):
    """A PEFT adapter (r 4, all-linear) saved from a base of the given shape."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=320, hidden_size=hidden, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = peft.get_peft_model(transformers.LlamaForCausalLM(config), peft.LoraConfig(
        r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    out = tmp / f"adapter_h{hidden}_l{layers}"
    model.save_pretrained(out)
    return out


@pytest.mark.parametrize("setting, message", [
    ({"lora_r": 0}, "lora_r: 0 is out of range: the rank must be >= 1"),
    ({"lora_r": -4}, "lora_r: -4 is out of range: the rank must be >= 1"),
    ({"lora_target_modules": ["q_proj", "qkv_proj"]},
     "lora_target_modules: 'qkv_proj' matches no module of the model; the linear layers are "
     "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"),
    ({"lora_target_modules": ".*attn\\.qkv"},
     "lora_target_modules: the regular expression '.*attn\\.qkv' matches no module path whole"),
    ({"lora_target_modules": ["input_layernorm"]},
     "lora_target_modules: 'input_layernorm' names model.layers.0.input_layernorm, which is not "
     "a linear layer"),
    ({"lora_modules_to_save": ["score"]},
     "lora_modules_to_save: 'score' matches no module of the model; its modules are"),
    ({"use_peft": False}, "lora_r: takes effect only with use_peft: true"),
])
def test_bad_lora_settings_are_refused_before_training(setting, message, tiny, air_bin,
                                                        tmp_path):
    out = tmp_path / "out"
    cfg = write(tmp_path / "p.yaml", params(tiny, out, **setting))
    proc = subprocess.run([air_bin, "train", "--config", str(cfg), "--threads", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert str(cfg) in proc.stderr
    assert not out.exists() or not any(out.iterdir())  # nothing trained, nothing written


@pytest.mark.parametrize("shape", [{"hidden": 48}, {"layers": 3}])
def test_an_adapter_of_another_base_names_the_first_tensor(shape, tiny, air_bin, tmp_path):
    start = peft_adapter(tmp_path, **shape)
    keys = sorted(load_file(str(start / "adapter_model.safetensors")))
    out = tmp_path / "out"
    cfg = write(tmp_path / "p.yaml", {k: v for k, v in params(
        tiny, out, lora_adapter_path=str(start)).items() if not k.startswith("lora_")
        or k == "lora_adapter_path"})
    proc = subprocess.run([air_bin, "train", "--config", str(cfg), "--threads", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "lora_adapter_path" in proc.stderr and str(cfg) in proc.stderr, proc.stderr
    assert str(start / "adapter_model.safetensors") in proc.stderr, proc.stderr
    if "hidden" in shape:
        # The first tensor in the file's order whose shape is not the one PEFT gives this base.
        got = load_file(str(start / "adapter_model.safetensors"))
        want = load_file(str(peft_adapter(tmp_path) / "adapter_model.safetensors"))
        first = next(k for k in keys if got[k].shape != want[k].shape)
        shape_text = lambda t: "[" + ", ".join(map(str, t.shape)) + "]"  # noqa: E731
        assert f"{first} has shape {shape_text(got[first])} but the model's is " \
               f"{shape_text(want[first])}" in proc.stderr, proc.stderr
    else:
        # A layer the model does not have.
        assert "base_model.model.model.layers.2." in proc.stderr, proc.stderr
        assert "is not a parameter of this model's adapter" in proc.stderr, proc.stderr
    assert not (out / "adapter_model.safetensors").exists()


# --- several ranks -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def one_rank(tiny, air_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "out"
    proc = train(air_bin, write(out.parent / "p.yaml", params(tiny, out)))
    assert "the base frozen" in proc.stdout, proc.stdout
    return out


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"])
def test_two_ranks_train_the_same_adapter_as_one(strategy, tiny, one_rank, air_bin, tmp_path):
    out = tmp_path / "out"
    proc = train(air_bin, write(tmp_path / "p.yaml", params(
        tiny, out, world=2, fsdp_sharding_strategy=strategy)), 2)
    assert f"{strategy} over gloo" in proc.stdout
    dl = max_rel_loss_diff(losses(out), losses(one_rank))
    dw = max_weight_diff(adapter(out), adapter(one_rank))
    print(f"LoRA {strategy} 2 ranks vs 1: max relative loss diff {dl:.3g}, adapter diff {dw:.3g}")
    assert dl <= 1e-5 and dw <= 1e-5
    assert not (out / "model.safetensors").exists()  # the adapter only


def test_four_ranks_under_air_run_with_lora_in_the_parameters_block(tiny, one_rank, air, air_bin,
                                                                     tmp_path):
    out = tmp_path / "out"
    command_line = (f"{air_bin} launch --nnodes $NUM_NODES --node-rank $NODE_RANK "
                    "--nproc-per-node 2 --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
                    f"--no-python {air_bin} train --threads 1")
    spec = write_spec(tmp_path, command_line, name="lora-2x2", nodes=2, per_node=2,
                      parameters=params(tiny, out, world=4, fsdp_sharding_strategy="HYBRID_SHARD"))
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=400)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    assert "HYBRID_SHARD over gloo" in logs[0] and "the base frozen" in logs[0], logs[0]
    dl = max_rel_loss_diff(losses(out), losses(one_rank))
    dw = max_weight_diff(adapter(out), adapter(one_rank))
    print(f"LoRA HYBRID_SHARD 4 ranks (2 nodes x 2) vs 1: loss diff {dl:.3g}, adapter diff "
          f"{dw:.3g}")
    assert dl <= 1e-5 and dw <= 1e-5


# --- resume ------------------------------------------------------------------------------------

def test_sigkill_then_resume_is_bit_identical(tiny, air_bin, tmp_path):
    setting = dict(world=2, lora_dropout=0.05, save_steps=5)
    straight = tmp_path / "straight"
    train(air_bin, write(tmp_path / "s.yaml", params(tiny, straight, **setting)), 2)
    out = tmp_path / "out"
    cfg = write(tmp_path / "p.yaml", params(tiny, out, resume_from_checkpoint="latest",
                                            **setting))
    # The launcher and both ranks, SIGKILLed mid-run.
    sigkill_once_complete(command(air_bin, cfg, 2), out / "checkpoint-5" / "COMPLETE")
    assert not (out / "adapter_model.safetensors").exists(), "killed too late"

    # The resumable state: this rank's shard of the trained parameters and their moments only.
    trained = sum(t.numel() for t in adapter(out / "checkpoint-5").values())
    state = 0
    for f in sorted((out / "checkpoint-5" / "train_state").glob("rank-*.safetensors")):
        with safe_open(str(f), "pt") as st:
            state += sum(st.get_slice(k).get_shape()[0] for k in st.keys())
    base = sum(t.numel() for t in load_file(str(tiny[0] / "model.safetensors")).values())
    print(f"checkpoint-5's train_state: {state} values for {trained} trained parameters "
          f"(the base has {base})")
    # Values, exp_avg and exp_avg_sq of the trained parameters (each unit's shards padded to
    # equal sizes: at most one element per rank and unit); nothing of the frozen base.
    units = 3  # two layers and the root
    assert 3 * trained <= state <= 3 * (trained + 2 * units), (state, trained)

    second = train(air_bin, cfg, 2)
    assert "checkpoint-5 (step 5)" in second.stdout, second.stdout
    assert losses(out, 6) == losses(straight, 6)  # bit for bit
    assert (out / "adapter_model.safetensors").read_bytes() == \
        (straight / "adapter_model.safetensors").read_bytes()


# --- the second seed's settings ----------------------------------------------------------------

SEED_LORA = {"use_peft": True, "lora_r": 16, "lora_alpha": 16, "lora_dropout": 0.05,
             "lora_target_modules": "all-linear", "lora_task_type": "CAUSAL_LM"}


def write_counting(path, n=32):
    """Rows that count up from a random start (mod 40): a next token the adapters can learn."""
    rng = random.Random(2)
    with open(path, "w") as f:
        for _ in range(n):
            start = rng.randrange(40)
            ids = [2 + (start + k) % 40 for k in range(rng.randint(8, 16))]
            f.write(json.dumps({"input_ids": ids, "labels": [-100] + ids[1:]}) + "\n")
    return path


def test_seed_lora_config_in_bf16_with_activation_checkpointing(tiny, air_bin, tmp_path):
    runs = {}
    data = write_counting(tmp_path / "counting.jsonl")
    for checkpointing in (True, False):
        out = tmp_path / f"out_{checkpointing}"
        p = params(tiny, out, world=2, fsdp="full_shard auto_wrap", bf16=True, max_steps=20,
                   activation_checkpointing=checkpointing, dataset_name=str(data))
        for k in LORA:
            p.pop(k)
        p.update(SEED_LORA)
        runs[checkpointing] = (out, train(air_bin, write(tmp_path / f"{checkpointing}.yaml", p), 2))
    out, proc = runs[True]
    assert "r 16, alpha 16 (scaling 1), dropout 0.05, targets all-linear: 14 linear layers" in \
        proc.stdout, proc.stdout
    assert "bf16 mixed precision" in proc.stdout
    curve = losses(out)
    print(f"seed LoRA, bf16, 2 ranks, activation checkpointing: loss {curve[0]:.4f} -> "
          f"{curve[-1]:.4f}")
    assert curve[-1] < curve[0] - 0.3  # measured 5.78 -> 5.30
    # Checkpointing recomputes the same layers (and draws the same dropout masks).
    assert losses(runs[False][0]) == curve
    assert adapter(runs[False][0]).keys() == adapter(out).keys()
    assert all(torch.equal(adapter(runs[False][0])[k], v) for k, v in adapter(out).items())
    # An fp32 adapter PEFT loads on the base, with no missing or unexpected keys.
    config = json.loads((out / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["lora_dropout"]) == (16, 16, 0.05)
    saved = adapter(out)
    assert all(t.dtype == torch.float32 for t in saved.values())
    model = peft.PeftModel.from_pretrained(
        transformers.LlamaForCausalLM.from_pretrained(tiny[0]), out)
    result = peft.set_peft_model_state_dict(model, saved)
    assert not result.unexpected_keys
    assert not [k for k in result.missing_keys if "lora_" in k]
