"""LoRA parity: `air train` with use_peft follows PEFT + transformers step for step, and its
files are PEFT's.

A tiny Llama (GQA, llama3 RoPE scaling, untied head) is saved by transformers; PEFT creates a
LoRA adapter on it, whose lora_B is then drawn non-zero (PEFT's own init makes it zero, which
would hide half the backward) and saved. air trains from that adapter (lora_adapter_path) for 10
optimizer steps — cosine schedule with warmup, accumulation 2, active clipping, weight decay —
dumping its batches and saving a checkpoint after every step; PEFT then trains the same adapter
on the same batches with torch.optim.AdamW (decay on 2-D tensors), the same schedule, clipping
and loss normalization. Two settings: the second seed's all-linear targets (scaling alpha/r), and
q_proj/v_proj with rslora and lm_head in modules_to_save. fp32 throughout; dropout 0 (PEFT's
masks come from torch's RNG).

Then, on air's own adapter (air's initialization, after training): PeftModel.from_pretrained
loads it with no missing or unexpected keys and exactly PEFT's all-linear module set; air's
logits, loss and adapter gradients equal PEFT's (air_engine_dump --adapter); `air generate
--adapter` decodes PEFT's greedy tokens; `air lora merge` equals merge_and_unload.

Tolerances are about 10x the worst measured (printed by each test; recorded in
docs/engine-lora.md).
"""
import json
import os
import pathlib
import subprocess

import pytest
import yaml

import torch  # a missing reference fails, never skips
import transformers  # noqa: E402
import peft  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from engine_ref import peft_checks  # noqa: E402

# ~10x the worst measured (AMD EPYC Zen 4, AVX-512, 2 threads; the bar is 1e-5).
LOSS_REL_TOL = 2e-6       # measured 1.6e-7
ADAPTER_ABS_TOL = 5e-7    # measured 4.5e-8 (max |air - peft| over every adapter tensor and step)
NORM_REL_TOL = 2e-6       # measured 1.3e-7
LOGITS_TOL = 7e-6         # measured 6.6e-7
GRAD_REL_TOL = 8e-6       # measured 7.4e-7 (||air - peft|| / ||peft|| per tensor)
MERGE_TOL = 1e-6          # measured 0 (the same fp32 products); the bar is 1e-5

# The model, the data and the optimizer settings of the full fine-tuning parity test.
from test_train_parity import (ACCUM, LR, MAX_GRAD_NORM, STEPS, VOCAB, WARMUP,  # noqa: E402
                               WEIGHT_DECAY, make_dataset, make_model)

REPO = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO / "examples" / "data" / "tiny_instruct" / "tokenizer"
TOKENIZER_VOCAB = 300


def load_base(model_dir):
    return transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager")


def make_adapter(model_dir, adapter_dir, **lora):
    """PEFT's adapter on the base, lora_B drawn non-zero, saved as PEFT saves it."""
    base = load_base(model_dir)
    torch.manual_seed(99)
    model = peft.get_peft_model(base, peft.LoraConfig(task_type="CAUSAL_LM", **lora))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)
    model.save_pretrained(adapter_dir)


def adapter_tensors(model):
    """PEFT's trainable tensors under the keys PEFT saves them with."""
    return {k: v.detach().clone() for k, v in peft.get_peft_model_state_dict(model).items()}


def peft_reference(model_dir, adapter_dir, batches_by_step):
    model = peft.PeftModel.from_pretrained(load_base(model_dir), adapter_dir, is_trainable=True)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in trainable if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
         {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0}],
        lr=LR, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    scheduler = transformers.get_cosine_schedule_with_warmup(optimizer, WARMUP, STEPS)
    states, losses, norms = [], [], []
    for step in range(1, STEPS + 1):
        micro = batches_by_step[step]
        n_items = sum(int((torch.tensor(b["labels"])[:, 1:] != -100).sum()) for b in micro)
        total = 0.0
        for b in micro:
            labels = torch.tensor(b["labels"])
            # Padding (segment 0) is masked out; rows are right-padded, unpacked.
            mask = (torch.tensor(b["segment_ids"]) != 0).long()
            logits = model(input_ids=torch.tensor(b["input_ids"]), attention_mask=mask,
                           position_ids=torch.tensor(b["position_ids"])).logits
            token_loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1),
                ignore_index=-100, reduction="sum")
            (token_loss / n_items).backward()
            total += float(token_loss.detach())
        norms.append(float(torch.nn.utils.clip_grad_norm_(trainable, MAX_GRAD_NORM)))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(total / n_items)
        states.append(adapter_tensors(model))
    return states, losses, norms


def train_config(path, model_dir, data, out, **extra):
    params = {
        "model_name": str(model_dir), "dataset_name": str(data), "output_dir": str(out),
        "max_seq_len": 32, "per_device_batch_size": 2, "gradient_accumulation_steps": ACCUM,
        "learning_rate": LR, "max_steps": STEPS, "lr_scheduler_type": "cosine",
        "warmup_steps": WARMUP, "weight_decay": WEIGHT_DECAY, "max_grad_norm": MAX_GRAD_NORM,
        "logging_steps": 1, "save_steps": 1, "seed": 3, "use_peft": True}
    params.update(extra)
    path.write_text(yaml.safe_dump(params))
    return path


CASES = {
    # The second seed's targets (all-linear), scaling alpha / r = 2.
    "all_linear": dict(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0),
    # A list of targets, rslora (scaling alpha / sqrt(r) = 8) and a head trained whole.
    "qv_rslora_lm_head": dict(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                              lora_dropout=0.0, use_rslora=True, modules_to_save=["lm_head"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ten_steps_follow_peft(air, tmp_path, case):
    model_dir, adapter_dir = tmp_path / "tiny", tmp_path / "init_adapter"
    make_model(model_dir, tied=False)
    make_adapter(model_dir, adapter_dir, **CASES[case])
    data = tmp_path / "data.jsonl"
    make_dataset(data)
    out = tmp_path / "out"
    cfg = train_config(tmp_path / "train.yaml", model_dir, data, out,
                       lora_adapter_path=str(adapter_dir))
    batches_file = tmp_path / "batches.jsonl"
    proc = air("train", "--config", cfg, "--dump-batches", batches_file, "--threads", 2,
               timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "starting from" in proc.stdout and "the base frozen" in proc.stdout, proc.stdout

    batches_by_step = {}
    for line in batches_file.read_text().splitlines():
        b = json.loads(line)
        batches_by_step.setdefault(b["step"], []).append(b)
    states, losses, norms = peft_reference(model_dir, adapter_dir, batches_by_step)
    metrics = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert max(norms) > MAX_GRAD_NORM  # clipping acts
    worst_loss = worst_norm = worst_weight = 0.0
    initial = load_file(str(adapter_dir / "adapter_model.safetensors"))
    for step in range(1, STEPS + 1):
        m = metrics[step - 1]
        loss_rel = abs(m["loss"] - losses[step - 1]) / abs(losses[step - 1])
        norm_rel = abs(m["grad_norm"] - norms[step - 1]) / abs(norms[step - 1])
        worst_loss, worst_norm = max(worst_loss, loss_rel), max(worst_norm, norm_rel)
        assert loss_rel <= LOSS_REL_TOL, (step, m, losses)
        assert norm_rel <= NORM_REL_TOL, (step, m, norms)
        got = load_file(str(out / f"checkpoint-{step}" / "adapter_model.safetensors"))
        want = states[step - 1]
        assert sorted(got) == sorted(want) == sorted(initial), (sorted(got), sorted(want))
        for name, w in want.items():
            diff = float((got[name] - w).abs().max())
            worst_weight = max(worst_weight, diff)
            assert diff <= ADAPTER_ABS_TOL, f"step {step} {name}: max |diff| {diff:.3g}"
    # The final adapter in output_dir is the last step's, and training moved every tensor.
    final = load_file(str(out / "adapter_model.safetensors"))
    for name, w in states[-1].items():
        assert float((final[name] - w).abs().max()) <= ADAPTER_ABS_TOL, name
        assert float((final[name] - initial[name]).abs().max()) > 100 * ADAPTER_ABS_TOL, name
    print(f"\n[lora parity {case}] loss rel {worst_loss:.3g} (tol {LOSS_REL_TOL}), grad-norm rel "
          f"{worst_norm:.3g} (tol {NORM_REL_TOL}), adapter max |diff| {worst_weight:.3g} "
          f"(tol {ADAPTER_ABS_TOL}) over {STEPS} steps")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, air_bin):
    """air's own adapter (air's initialization), all-linear, after 4 steps, on a base with the
    quickstart's tokenizer (300 ids) for generation."""
    tmp = tmp_path_factory.mktemp("lora_trained")
    model_dir = tmp / "tiny"
    make_model(model_dir, tied=False, vocab=TOKENIZER_VOCAB)
    for f in TOKENIZER_DIR.iterdir():
        (model_dir / f.name).write_bytes(f.read_bytes())
    data = tmp / "data.jsonl"
    make_dataset(data)
    out = tmp / "out"
    cfg = train_config(tmp / "train.yaml", model_dir, data, out, max_steps=4, save_steps=0,
                       lora_r=8, lora_alpha=16, lora_target_modules="all-linear",
                       lora_dropout=0.0, learning_rate=0.02)
    proc = subprocess.run([air_bin, "train", "--config", str(cfg), "--threads", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return model_dir, out


def engine_dump_bin():
    path = os.environ.get("AIR_ENGINE_DUMP")
    if path:
        return path
    air = os.environ.get("AIR_BIN", str(REPO / "build" / "bin" / "air"))
    return str(pathlib.Path(air).parent / "air_engine_dump")


def test_peft_loads_airs_adapter_and_computes_the_same(trained, tmp_path):
    model_dir, adapter = trained
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 8 and config["lora_alpha"] == 16
    assert config["base_model_name_or_path"] == str(model_dir)
    # Exactly PEFT's all-linear set and keys; logits, loss and the adapters' gradients.
    saved, logits_diff, loss_rel, worst_grad = peft_checks.peft_loads_and_matches(
        model_dir, adapter, load_base, engine_dump_bin(), tmp_path / "batch.json",
        tmp_path / "dump.safetensors", TOKENIZER_VOCAB,
        peft.LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    assert saved["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"].shape == (8, 32)
    assert saved["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"].shape == (32, 8)
    print(f"\n[lora peft load] logits max |diff| {logits_diff:.3g} (tol {LOGITS_TOL}), loss rel "
          f"{loss_rel:.3g}, adapter gradient rel {worst_grad:.3g} (tol {GRAD_REL_TOL})")
    assert worst_grad <= GRAD_REL_TOL
    assert logits_diff <= LOGITS_TOL
    assert loss_rel <= LOSS_REL_TOL


def test_generate_with_adapter_decodes_peft_greedy_tokens(trained, air):
    model_dir, adapter = trained
    code, env = air.json("generate", "--model", model_dir, "--adapter", adapter, "--prompt",
                         "Reverse the letters", "--max-new-tokens", 12, "--threads", 2)
    assert code == 0, env
    got = env["data"]["token_ids"]
    ids = transformers.AutoTokenizer.from_pretrained(model_dir)("Reverse the letters")["input_ids"]
    assert env["data"]["prompt_tokens"] == len(ids)
    model = peft.PeftModel.from_pretrained(load_base(model_dir), adapter).eval()
    want = peft_checks.greedy_tokens(model, torch.tensor([ids]), 12)
    base = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    without = peft_checks.greedy_tokens(base, torch.tensor([ids]), 12)
    print(f"\n[lora generate] air {got}\n                peft {want}\n      base alone {without}")
    assert got == want[:len(got)] and len(got) > 0
    assert want != without  # the adapter changes what is generated


def test_merge_equals_merge_and_unload(trained, air, tmp_path):
    model_dir, adapter = trained
    worst, moved = peft_checks.merge_matches(air, model_dir, adapter, tmp_path / "merged",
                                             load_base, modules=14)
    print(f"\n[lora merge] max |air - merge_and_unload| {worst:.3g} (tol {MERGE_TOL}); the merge "
          f"moved weights by up to {moved:.3g}")
    assert worst <= MERGE_TOL
    assert moved > 100 * MERGE_TOL
