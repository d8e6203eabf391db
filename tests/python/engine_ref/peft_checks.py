"""The checks of an adapter `air train` wrote against PEFT + transformers, shared by the LoRA tests
of every architecture (test_lora_parity.py: Llama; test_gpt_oss_lora.py: GPT-OSS). `load` is the
test's way of loading the base fp32 model with transformers (its attention and experts
implementations); each check returns what it measured for the test to print and bound.
"""
import json
import random
import subprocess

import peft
import torch
from safetensors.torch import load_file


def peft_loads_and_matches(model_dir, adapter, load, dump_bin, batch_path, dump_path, vocab,
                           lora_config):
    """PEFT's own model for `lora_config` has exactly the target modules and tensor keys air saved;
    PeftModel.from_pretrained loads air's adapter with no missing or unexpected keys; air's logits
    and adapter gradients (air_engine_dump --adapter, activation checkpointing) against PEFT's on
    a random batch. Returns (the saved tensors, logits max |diff|, loss relative difference,
    the worst adapter gradient ||diff|| / ||peft||)."""
    config = json.loads((adapter / "adapter_config.json").read_text())
    reference = peft.get_peft_model(load(model_dir), lora_config)
    assert sorted(config["target_modules"]) == sorted(
        reference.peft_config["default"].target_modules)
    saved = load_file(str(adapter / "adapter_model.safetensors"))
    assert sorted(saved) == sorted(peft.get_peft_model_state_dict(reference))
    assert all(float(v.abs().max()) > 0 for k, v in saved.items() if "lora_B" in k)  # trained

    model = peft.PeftModel.from_pretrained(load(model_dir), adapter, is_trainable=True)
    result = peft.set_peft_model_state_dict(model, saved)
    assert not result.unexpected_keys, result.unexpected_keys
    assert not [k for k in result.missing_keys if "lora_" in k], result.missing_keys

    rng = random.Random(5)
    ids = [[rng.randrange(3, vocab) for _ in range(20)] for _ in range(2)]
    labels = [[-100] * 4 + row[4:] for row in ids]
    batch_path.write_text(json.dumps({"input_ids": ids, "labels": labels}))
    proc = subprocess.run([dump_bin, "--model", str(model_dir), "--adapter", str(adapter),
                           "--batch", str(batch_path), "--out", str(dump_path), "--checkpointing"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = load_file(str(dump_path))
    model.train()
    logits = model(input_ids=torch.tensor(ids)).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab),
                                             torch.tensor(labels)[:, 1:].reshape(-1),
                                             ignore_index=-100)
    loss.backward()
    logits_diff = float((got["logits"] - logits.detach()).abs().max())
    loss_rel = abs(float(got["loss"][0]) - loss.item()) / loss.item()
    grads = {k.removeprefix("grad."): v for k, v in got.items() if k.startswith("grad.")}
    peft_grads = {n.replace(".default", ""): p.grad for n, p in model.named_parameters()
                  if p.requires_grad}
    assert sorted("base_model.model." + k for k in grads) == sorted(peft_grads)
    worst_grad = max(float((g - peft_grads["base_model.model." + k]).norm() /
                           peft_grads["base_model.model." + k].norm()) for k, g in grads.items())
    return saved, logits_diff, loss_rel, worst_grad


def merge_matches(air, model_dir, adapter, merged, load, modules):
    """`air lora merge` against PEFT's merge_and_unload; transformers loads the result. Returns
    (max |air - merge_and_unload|, the largest change the merge made to a base weight)."""
    code, env = air.json("lora", "merge", "--base", model_dir, "--adapter", adapter, "--out",
                         merged)
    assert code == 0, env
    assert env["data"]["merged_modules"] == modules
    got = load_file(str(merged / "model.safetensors"))
    want = peft.PeftModel.from_pretrained(load(model_dir), adapter).merge_and_unload().state_dict()
    assert sorted(got) == sorted(want)
    worst = max(float((got[k] - want[k]).abs().max()) for k in want)
    base = load_file(str(model_dir / "model.safetensors"))
    moved = max(float((got[k] - base[k]).abs().max()) for k in base)
    load(merged)  # transformers loads the merged directory as a plain model
    return worst, moved


def greedy_tokens(model, ids, max_new_tokens, **kwargs):
    """transformers' greedy continuation of `ids` (1, T) by `model`."""
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids),
                             max_new_tokens=max_new_tokens, do_sample=False, **kwargs)
    return out[0, ids.shape[1]:].tolist()
