"""LoRA on GPT-OSS (`use_peft` with a GptOssForCausalLM base) against PEFT + transformers.

The tiny random GPT-OSS of engine_ref/tiny_gpt_oss.py (saved by transformers: 2 layers, 4 experts
top-2, sliding window 8, non-zero sinks, YaRN) with PEFT's LoRA:

- which modules: PEFT's all-linear on GptOssForCausalLM picks q_proj, k_proj, v_proj and o_proj
  of every layer (the router is a GptOssTopKRouter and the experts 3-D parameters, neither an
  nn.Linear); air's adapter_config.json lists exactly PEFT's set and its tensors PEFT's keys.
- the experts through PEFT's target_parameters (its ParamWrapper: per expert W_e + scaling
  A_e^T B_e^T) beside all-linear, in every test below: EXPERTS = mlp.experts.gate_up_proj and
  mlp.experts.down_proj, whose adapters PEFT nests and names ...mlp.experts.base_layer.lora_A
  (gate_up) and ...mlp.experts.lora_A (down), lora_A [r*E, in], lora_B [out, r*E].
- 10 AdamW steps from a PEFT adapter whose lora_B is drawn non-zero (PEFT's init makes it zero,
  which would hide half the backward): losses, gradient norms and every adapter tensor of every
  checkpoint against PEFT trained on the same micro-batches (engine_ref/train_reference.py),
  within 1e-5 relative (the issue's bound) and about 10x the worst measured (printed).
- air's own adapter: PeftModel.from_pretrained loads it (no missing or unexpected keys) and its
  logits and adapter gradients equal air's (air_engine_dump --adapter, activation
  checkpointing); `air generate --adapter` decodes PEFT's greedy tokens past the window;
  `air lora merge` equals merge_and_unload.
- 2 ranks (FULL_SHARD, units = decoder layers) train the adapter 1 rank trains (dropout 0), from
  the same PEFT adapter (from air's own init, lora_B zero, A's first AdamW updates are
  sign-like on gradients that B's first step just made: one component came out 4e-5 of its
  tensor's largest value apart in a trial, the rounding of a near-cancelled gradient, not a
  sharding fault); a bf16 base with activation checkpointing trains bit for bit as without.
- bad input: a target GPT-OSS does not have (named, with the valid ones), the router (not a
  linear layer), no target_modules (PEFT has no default for gpt_oss), a target parameter that
  matches no expert weight or names another parameter (named, with the expert weights), and
  lora_dropout != 0 with target parameters (PEFT's ParamWrapper refuses it too) — refused before
  any weight is read; a PEFT adapter with target_parameters alone (target_modules null, the
  names in the other order) is taken as a starting adapter.
"""
import json
import subprocess

import pytest
import torch  # a missing reference fails, never skips
import transformers  # a missing reference fails, never skips
import peft
from safetensors.torch import load_file

from engine_ref import peft_checks
from engine_ref.tiny_gpt_oss import load_model, make_model
from engine_ref.train_reference import train_steps
# The tiny model (fixture `tiny`: seed 32, the parity data) and the optimizer settings of the full
# fine-tuning test (same directory).
from test_gpt_oss_train import (ACCUM, LR, MAX_GRAD_NORM, STEPS, WARMUP, WEIGHT_DECAY,  # noqa: F401
                                params as full_params, rel_max, run_train, tiny, write_params)
from test_train_parity import make_dataset

# ~10x the worst measured (AMD EPYC Zen 4, AVX-512, 2 threads; all-linear + the experts); the
# issue's bar is 1e-5.
LOSS_REL_TOL = 1e-6       # measured 9.8e-8
NORM_REL_TOL = 8e-6       # measured 8.7e-7
ADAPTER_REL_TOL = 1e-5    # measured 1.4e-6 (max |air - peft| / max |peft| per tensor and step)
LOGITS_TOL = 3e-5         # measured 2.9e-6 (max |diff|, logits of order 1)
GRAD_REL_TOL = 1.6e-5     # measured 1.6e-6 (||air - peft|| / ||peft|| per tensor)
MERGE_TOL = 1e-6          # measured 0 (the same fp32 products)
TWO_RANKS_LOSS_TOL = 7e-8     # measured 6.6e-9
TWO_RANKS_ADAPTER_TOL = 1.2e-5  # measured 1.2e-6 (max |diff| / max |1 rank's| per tensor)
PEFT_ALL_LINEAR = ["k_proj", "o_proj", "q_proj", "v_proj"]
EXPERTS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
GEN_VOCAB = 320  # test_train_cli.make_tokenizer's


def params(model_dir, data, out, **extra):
    """test_gpt_oss_train's settings with the seed's LoRA (all-linear) at dropout 0, and the
    experts (target parameters)."""
    p = full_params(model_dir, data, out, use_peft=True, lora_target_modules="all-linear",
                    lora_dropout=0.0, lora_target_parameters=EXPERTS)
    p.update(extra)
    return p


def peft_tensors(state):
    """A PeftModel state dict's adapter tensors under the keys PEFT saves them with."""
    return {k.replace(".default", ""): v for k, v in state.items() if ".lora_" in k}


def test_peft_all_linear_picks_the_attention_projections(tiny):
    model_dir, _ = tiny
    model = peft.get_peft_model(load_model(model_dir), peft.LoraConfig(
        r=16, lora_alpha=16, target_modules="all-linear", lora_dropout=0.05, bias="none",
        task_type="CAUSAL_LM"))
    picked = model.peft_config["default"].target_modules
    assert sorted({m.rsplit(".", 1)[-1] for m in picked}) == PEFT_ALL_LINEAR, picked
    assert len(picked) == 4 * 2
    with pytest.raises(ValueError, match="target_modules"):  # no default for gpt_oss
        peft.get_peft_model(load_model(model_dir), peft.LoraConfig(task_type="CAUSAL_LM"))


@pytest.fixture(scope="module")
def start_adapter(tiny, tmp_path_factory):
    """PEFT's all-linear + experts adapter (r 4, alpha 8) on the tiny model, lora_B drawn
    non-zero."""
    model_dir, _ = tiny
    adapter_dir = tmp_path_factory.mktemp("gpt_oss_lora_start") / "adapter"
    torch.manual_seed(99)
    start = peft.get_peft_model(load_model(model_dir), peft.LoraConfig(
        r=4, lora_alpha=8, target_modules="all-linear", target_parameters=EXPERTS,
        lora_dropout=0.0, task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in start.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)
    start.save_pretrained(adapter_dir)
    return adapter_dir


def test_ten_steps_follow_peft(air, tiny, start_adapter, tmp_path):
    model_dir, data = tiny
    adapter_dir = start_adapter
    out = tmp_path / "out"
    cfg = write_params(tmp_path / "train.yaml",
                       params(model_dir, data, out, save_steps=1,
                              lora_adapter_path=str(adapter_dir)))
    batches_file = tmp_path / "batches.jsonl"
    proc = air("train", "--config", cfg, "--dump-batches", batches_file, "--threads", 2,
               timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "starting from" in proc.stdout, proc.stdout
    assert "8 linear layers and 4 expert weights" in proc.stdout, proc.stdout
    batches_by_step = {}
    for line in batches_file.read_text().splitlines():
        b = json.loads(line)
        batches_by_step.setdefault(b["step"], []).append(b)
    longest = max(sum(1 for s in row if s) for micro in batches_by_step.values()
                  for b in micro for row in b["segment_ids"])
    assert longest > 2 * 8, "rows must be longer than the sliding window"

    model = peft.PeftModel.from_pretrained(load_model(model_dir), adapter_dir, is_trainable=True)
    states, losses, norms = train_steps(
        model, batches_by_step, steps=STEPS, accum=ACCUM, lr=LR, warmup=WARMUP,
        weight_decay=WEIGHT_DECAY, max_grad_norm=MAX_GRAD_NORM, packed=False)
    assert max(norms) > MAX_GRAD_NORM, "clipping must act"
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, STEPS + 1))
    initial = load_file(str(adapter_dir / "adapter_model.safetensors"))
    worst = {"loss": 0.0, "grad norm": 0.0, "adapter": 0.0}
    for step in range(1, STEPS + 1):
        m = metrics[step - 1]
        worst["loss"] = max(worst["loss"], abs(m["loss"] - losses[step - 1]) / losses[step - 1])
        worst["grad norm"] = max(worst["grad norm"],
                                 abs(m["grad_norm"] - norms[step - 1]) / norms[step - 1])
        got = load_file(str(out / f"checkpoint-{step}" / "adapter_model.safetensors"))
        want = peft_tensors(states[step - 1])
        assert sorted(got) == sorted(want) == sorted(initial)
        assert all(got[k].shape == want[k].shape for k in want)
        worst["adapter"] = max([worst["adapter"]] + [rel_max(got[k], want[k]) for k in want])
    final = load_file(str(out / "adapter_model.safetensors"))
    assert sum(".mlp.experts." in k for k in final) == 2 * 2 * 2  # A and B, 2 per layer
    moved = min(rel_max(final[k], initial[k]) for k in initial)
    print(f"\n[gpt-oss lora parity] 10 steps vs PEFT: worst {worst}; losses "
          f"{[round(x, 4) for x in losses]}; smallest relative move of a tensor {moved:.3g}")
    assert worst["loss"] <= LOSS_REL_TOL and worst["grad norm"] <= NORM_REL_TOL
    assert worst["adapter"] <= ADAPTER_REL_TOL
    assert moved > 1e-3, "training moved every adapter tensor"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, air_bin):
    """air's own adapter (air's initialization), all-linear + experts r 8, after 4 steps, on a
    base with a 320-id tokenizer (for generation)."""
    from test_train_cli import make_tokenizer  # noqa: E402  (same directory)
    root = tmp_path_factory.mktemp("gpt_oss_lora_trained")
    model_dir = root / "model"
    make_model("released", model_dir, seed=5, vocab=GEN_VOCAB)
    make_tokenizer(model_dir)
    data = root / "data.jsonl"
    make_dataset(data)
    out = root / "out"
    cfg = write_params(root / "train.yaml",
                       params(model_dir, data, out, max_steps=4, lora_r=8, lora_alpha=16,
                              learning_rate=0.02))
    proc = subprocess.run([air_bin, "train", "--config", str(cfg), "--threads", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return model_dir, out


def test_peft_loads_airs_adapter_and_computes_the_same(trained, dump_bin, tmp_path):
    model_dir, adapter = trained
    saved, logits_diff, loss_rel, worst_grad = peft_checks.peft_loads_and_matches(
        model_dir, adapter, load_model, dump_bin, tmp_path / "batch.json",
        tmp_path / "dump.safetensors", GEN_VOCAB,
        peft.LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                        target_parameters=EXPERTS, task_type="CAUSAL_LM"))
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["target_parameters"] == EXPERTS and config["lora_dropout"] == 0
    assert saved["base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight"].shape == (32, 8)
    # PEFT's layout of the experts' adapters: E = 4, r = 8, hidden 64, intermediate 32.
    experts = "base_model.model.model.layers.1.mlp.experts."
    assert saved[experts + "base_layer.lora_A.weight"].shape == (32, 64)  # gate_up [r*E, H]
    assert saved[experts + "base_layer.lora_B.weight"].shape == (64, 32)  # [2I, r*E]
    assert saved[experts + "lora_A.weight"].shape == (32, 32)  # down [r*E, I]
    assert saved[experts + "lora_B.weight"].shape == (64, 32)  # [H, r*E]
    print(f"\n[gpt-oss lora peft load] logits max |diff| {logits_diff:.3g} (tol {LOGITS_TOL}), "
          f"loss rel {loss_rel:.3g}, adapter gradient rel {worst_grad:.3g} (tol {GRAD_REL_TOL})")
    assert logits_diff <= LOGITS_TOL
    assert loss_rel <= LOSS_REL_TOL
    assert worst_grad <= GRAD_REL_TOL


def test_generate_with_adapter_decodes_peft_greedy_tokens(trained, air):
    model_dir, adapter = trained
    prompt = ("The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat "
              "near the old wooden door")
    code, env = air.json("generate", "--model", model_dir, "--adapter", adapter, "--prompt",
                         prompt, "--max-new-tokens", 12, "--threads", 2)
    assert code == 0, env
    got = env["data"]["token_ids"]
    ids = transformers.AutoTokenizer.from_pretrained(model_dir)(prompt, return_tensors="pt")
    ids = ids.input_ids
    assert env["data"]["prompt_tokens"] == ids.shape[1] > 3 * 8  # past the window
    model = peft.PeftModel.from_pretrained(load_model(model_dir), adapter).eval()
    # The tokenizer's BOS is id 0, the model's pad id: no eos stop, the mask given.
    want = peft_checks.greedy_tokens(model, ids, 12, eos_token_id=None, pad_token_id=0)
    without = peft_checks.greedy_tokens(load_model(model_dir), ids, 12, eos_token_id=None,
                                        pad_token_id=0)
    print(f"\n[gpt-oss lora generate] air {got}\n  peft {want}\n  base alone {without}")
    assert got == want[:len(got)] and len(got) > 0
    assert want != without  # the adapter changes what is generated


def test_merge_equals_merge_and_unload(trained, air, tmp_path):
    model_dir, adapter = trained
    worst, moved = peft_checks.merge_matches(air, model_dir, adapter, tmp_path / "merged",
                                             load_model, modules=8 + 4)
    print(f"\n[gpt-oss lora merge] max |air - merge_and_unload| {worst:.3g} (tol {MERGE_TOL}); "
          f"moved up to {moved:.3g}")
    assert worst <= MERGE_TOL and moved > 100 * MERGE_TOL


def test_two_ranks_train_as_one_and_bf16_with_checkpointing(air_bin, tiny, start_adapter,
                                                            tmp_path):
    model_dir, data = tiny
    runs = {}
    settings = {
        "1 rank": (1, {}),
        "2 ranks": (2, {"per_device_batch_size": 1, "fsdp_sharding_strategy": "FULL_SHARD"}),
        "bf16": (1, {"bf16": True}),
        "bf16 checkpointed": (1, {"bf16": True, "activation_checkpointing": True}),
    }
    for name, (world, extra) in settings.items():
        out = tmp_path / name.replace(" ", "_")
        p = params(model_dir, data, out, max_steps=5, per_device_batch_size=2,
                   lora_adapter_path=str(start_adapter))
        p.update(extra)
        proc = run_train(air_bin, write_params(tmp_path / f"{out.name}.yaml", p), world)
        if name == "2 ranks":
            assert "FULL_SHARD" in proc.stdout, proc.stdout
        lines = (out / "metrics.jsonl").read_text().splitlines()
        runs[name] = ([json.loads(line)["loss"] for line in lines],
                      load_file(str(out / "adapter_model.safetensors")))
    (l1, a1), (l2, a2) = runs["1 rank"], runs["2 ranks"]
    assert len(l1) == len(l2) == 5 and a1.keys() == a2.keys()
    dl = max(abs(a - b) / b for a, b in zip(l2, l1))
    da = max(rel_max(a2[k], a1[k]) for k in a1)
    (lb, ab), (lc, ac) = runs["bf16"], runs["bf16 checkpointed"]
    print(f"\n[gpt-oss lora] FULL_SHARD 2 ranks vs 1: loss {dl:.3g}, adapter {da:.3g}; "
          f"bf16 losses {[round(x, 4) for x in lb]}")
    assert dl <= TWO_RANKS_LOSS_TOL and da <= TWO_RANKS_ADAPTER_TOL
    assert lb == lc and all(torch.equal(ab[k], ac[k]) for k in ab)  # recomputation is exact
    assert lb[-1] < lb[0], "the bf16 run learns"
    assert max(abs(a - b) / b for a, b in zip(lb, l1)) < 0.05  # bf16 near fp32


def dry_run(air, tiny, tmp_path, **extra):
    model_dir, data = tiny
    p = {k: v for k, v in params(model_dir, data, tmp_path / "out", **extra).items()
         if v is not None}
    cfg = write_params(tmp_path / "bad.yaml", p)
    proc = air("train", "--config", cfg, "--dry-run")
    return proc


def test_bad_targets_are_named_with_the_valid_ones(air, tiny, tmp_path):
    proc = dry_run(air, tiny, tmp_path, lora_target_modules=["q_proj", "gate_proj"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for text in ("lora_target_modules", "'gate_proj' matches no module",
                 "q_proj, k_proj, v_proj, o_proj"):
        assert text in proc.stderr, proc.stderr
    proc = dry_run(air, tiny, tmp_path, lora_target_modules=["router"])
    assert proc.returncode == 2
    assert "model.layers.0.mlp.router, which is not a linear layer" in proc.stderr, proc.stderr
    proc = dry_run(air, tiny, tmp_path, lora_target_modules=None, lora_target_parameters=None)
    assert proc.returncode == 2
    assert "no default target modules for GptOssForCausalLM" in proc.stderr, proc.stderr
    # Target parameters: one GPT-OSS lacks, another parameter than an expert weight, and
    # dropout, which PEFT's ParamWrapper refuses (checked against PEFT itself).
    proc = dry_run(air, tiny, tmp_path, lora_target_parameters=["mlp.experts.gate_proj"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for text in ("lora_target_parameters", "'mlp.experts.gate_proj' matches no parameter",
                 "mlp.experts.gate_up_proj, mlp.experts.down_proj",
                 "model.layers.0.mlp.experts.gate_up_proj and so on"):
        assert text in proc.stderr, proc.stderr
    proc = dry_run(air, tiny, tmp_path, lora_target_parameters=["mlp.router.weight"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("'mlp.router.weight' names model.layers.0.mlp.router.weight, which air does not adapt"
            in proc.stderr), proc.stderr
    proc = dry_run(air, tiny, tmp_path, lora_dropout=0.05)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "lora_dropout: 0.05 with lora_target_parameters" in proc.stderr, proc.stderr
    assert "set lora_dropout: 0" in proc.stderr
    model_dir, _ = tiny
    with pytest.raises(ValueError, match="lora_dropout != 0"):
        peft.get_peft_model(load_model(model_dir), peft.LoraConfig(
            r=4, target_parameters=EXPERTS, lora_dropout=0.05, task_type="CAUSAL_LM"))


def test_a_peft_adapter_with_target_parameters_alone_starts_a_run(air, tiny, tmp_path):
    model_dir, data = tiny
    adapter_dir = tmp_path / "experts_adapter"
    model = peft.get_peft_model(load_model(model_dir), peft.LoraConfig(
        r=4, lora_alpha=8, lora_dropout=0.0, target_parameters=list(reversed(EXPERTS)),
        task_type="CAUSAL_LM"))
    model.save_pretrained(adapter_dir)
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    assert config["target_modules"] is None
    proc = dry_run(air, tiny, tmp_path, lora_adapter_path=str(adapter_dir),
                   lora_target_modules=None, lora_target_parameters=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 linear layers and 4 expert weights" in proc.stdout, proc.stdout
    assert "target parameters mlp.experts.down_proj, mlp.experts.gate_up_proj" in proc.stdout
