#!/usr/bin/env python3
"""Makes the GPT-OSS format fixtures under tests/data/gpt_oss/ with transformers (the reference):

  tiny_bf16/    a tiny GptOssForCausalLM saved by save_pretrained in bfloat16, sharded
                (model-0000i-of-0000n.safetensors + model.safetensors.index.json), plus
                tensors.json: the checkpoint's {name: [shape, dtype]} as transformers wrote it
  tiny_mxfp4/   the same model with its experts stored as the released checkpoints store them —
                U8 `*_blocks` [E, rows, cols/32, 16] and `*_scales` [E, rows, cols/32], config.json's
                quantization_config {"quant_method": "mxfp4"} — sharded with an index, plus
                expected.safetensors: the expert parameters transformers' from_pretrained(...,
                quantization_config=Mxfp4Config(dequantize=True)) loads from it in float32
                ("NAME.float32") and bfloat16 ("NAME.bfloat16"), in GptOssExperts' layout
                (gate_up_proj [E, H, 2I], down_proj [E, I, H]). Layer 0's gate_up_proj scales are a
                permutation of all 256 E8M0 values (2^-127 ... 2^128; large ones overflow to
                infinity); blocks hold random bytes, every byte value included.
  configs/      config.json variants (the released 120b/20b files, transformers 5's
                save_pretrained output, defaults left out, aliases) and expected.json: the values
                transformers' GptOssConfig reads from each (after its defaults and RoPE
                standardization) and the YaRN attention factor from _compute_yarn_parameters.

air's gtests (tests/unit/engine_core/gpt_oss_*_test.cc, mxfp4_test.cc) read these;
tests/python/test_gpt_oss_formats.py re-runs this script and checks the committed files still
hold what transformers produces.

    python make_gpt_oss_fixtures.py OUT_DIR
"""
import copy
import json
import os
import sys
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import GptOssConfig, GptOssForCausalLM, Mxfp4Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

EXPERTS, HIDDEN, INTERMEDIATE = 2, 64, 32
SHARD = "60KB"


def tiny_config() -> GptOssConfig:
    return GptOssConfig(num_hidden_layers=2, num_local_experts=EXPERTS, num_experts_per_tok=2,
                        hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, head_dim=8,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=32,
                        sliding_window=8, max_position_embeddings=256, eos_token_id=3,
                        pad_token_id=2, rope_parameters={
                            "rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "truncate": False,
                            "original_max_position_embeddings": 64, "rope_theta": 150000.0})


def tensor_table(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    table = {}
    for shard in shards:
        with safe_open(os.path.join(model_dir, shard), "pt") as f:
            for name in f.keys():
                t = f.get_slice(name)
                table[name] = [list(t.get_shape()), t.get_dtype()]
    return dict(sorted(table.items()))


def packed_experts(gen: torch.Generator, layer: int) -> dict:
    """Layer `layer`'s experts as stored bytes: gate_up_proj 2I rows over H, down_proj H over I."""
    def blocks(rows, cols):
        b = torch.randint(0, 256, (EXPERTS, rows, cols // 32, 16), generator=gen)
        b.view(-1)[:256] = torch.arange(256)  # every byte value at least once
        return b.to(torch.uint8)

    groups = EXPERTS * 2 * INTERMEDIATE * (HIDDEN // 32)
    if layer == 0:
        gate_up_scales = torch.randperm(256, generator=gen).repeat(groups // 256 + 1)[:groups]
    else:
        gate_up_scales = torch.randint(115, 130, (groups,), generator=gen)
    down_scales = torch.randint(115, 130, (EXPERTS * HIDDEN * (INTERMEDIATE // 32),),
                                generator=gen)
    if layer == 0:
        down_scales[:6] = torch.tensor([0, 1, 127, 253, 254, 255])
    prefix = f"model.layers.{layer}.mlp.experts."
    return {
        prefix + "gate_up_proj_blocks": blocks(2 * INTERMEDIATE, HIDDEN),
        prefix + "gate_up_proj_scales":
            gate_up_scales.reshape(EXPERTS, 2 * INTERMEDIATE, HIDDEN // 32).to(torch.uint8),
        prefix + "down_proj_blocks": blocks(HIDDEN, INTERMEDIATE),
        prefix + "down_proj_scales":
            down_scales.reshape(EXPERTS, HIDDEN, INTERMEDIATE // 32).to(torch.uint8),
    }


def write_sharded(state: dict, model_dir: str, per_shard: int) -> None:
    """Writes `state` as shards of `per_shard` tensors plus model.safetensors.index.json."""
    names = list(state)
    chunks = [names[i:i + per_shard] for i in range(0, len(names), per_shard)]
    weight_map, total = {}, 0
    for i, chunk in enumerate(chunks):
        shard = f"model-{i + 1:05d}-of-{len(chunks):05d}.safetensors"
        save_file({n: state[n].contiguous() for n in chunk}, os.path.join(model_dir, shard),
                  metadata={"format": "pt"})
        for n in chunk:
            weight_map[n] = shard
            total += state[n].numel() * state[n].element_size()
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def make_checkpoints(out: str) -> None:
    torch.manual_seed(0)
    config = tiny_config()
    model = GptOssForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.normal_()
    bf16_dir = os.path.join(out, "tiny_bf16")
    model.save_pretrained(bf16_dir, max_shard_size=SHARD)
    with open(os.path.join(bf16_dir, "tensors.json"), "w") as f:
        json.dump(tensor_table(bf16_dir), f, indent=1)

    gen = torch.Generator().manual_seed(20250805)
    mx_dir = os.path.join(out, "tiny_mxfp4")
    os.makedirs(mx_dir, exist_ok=True)
    state = {k: v for k, v in model.state_dict().items()
             if not k.endswith("experts.gate_up_proj") and not k.endswith("experts.down_proj")}
    for layer in range(config.num_hidden_layers):
        state.update(packed_experts(gen, layer))
    write_sharded(dict(sorted(state.items())), mx_dir, per_shard=12)
    config_json = config.to_dict()
    config_json.pop("transformers_version", None)  # stable across transformers releases
    config_json["dtype"] = "bfloat16"
    config_json["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"]}
    with open(os.path.join(mx_dir, "config.json"), "w") as f:
        json.dump(config_json, f, indent=2)
    expected = {}
    for dtype, suffix in [(torch.float32, "float32"), (torch.bfloat16, "bfloat16")]:
        loaded, info = GptOssForCausalLM.from_pretrained(
            mx_dir, dtype=dtype, quantization_config=Mxfp4Config(dequantize=True),
            output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"], info
        for i, layer in enumerate(loaded.model.layers):
            for name in ["gate_up_proj", "down_proj"]:
                param = getattr(layer.mlp.experts, name).detach()
                assert param.dtype == dtype, (name, param.dtype)
                if i == 0 or dtype == torch.float32:
                    expected[f"model.layers.{i}.mlp.experts.{name}.{suffix}"] = param.clone()
    save_file(expected, os.path.join(mx_dir, "expected.safetensors"), metadata={"format": "pt"})


RELEASED_120B = {  # https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
    "intermediate_size": 2880, "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
    "num_experts_per_tok": 4, "num_hidden_layers": 36, "num_key_value_heads": 8,
    "num_local_experts": 128, "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05, "rope_scaling": {
        "beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
        "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128,
    "swiglu_limit": 7.0, "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0",
    "use_cache": True, "vocab_size": 201088}


def config_variants() -> dict:
    released_20b = copy.deepcopy(RELEASED_120B)  # the 20b file differs in these fields
    released_20b.update(num_hidden_layers=24, num_local_experts=32,
                        layer_types=["sliding_attention", "full_attention"] * 12,
                        router_aux_loss_coef=0.9)
    saved = GptOssConfig(dtype="bfloat16").to_dict()  # transformers 5's own file
    saved["architectures"] = ["GptOssForCausalLM"]
    saved.pop("transformers_version", None)  # stable across transformers releases
    return {
        "released_120b": RELEASED_120B,
        "released_20b": released_20b,
        "transformers_default": saved,
        "minimal": {"model_type": "gpt_oss", "num_hidden_layers": 3},
        "aliases_and_defaults": {
            "architectures": ["GptOssForCausalLM"], "num_experts": 8, "num_hidden_layers": 4,
            "hidden_size": 96, "num_attention_heads": 6, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 48, "sliding_window": 16,
            "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                            "full_attention"], "rope_theta": 10000.0,
            "rope_scaling": {"type": "yarn", "factor": 8.0, "mscale": 0.707,
                             "mscale_all_dim": 1.0, "beta_fast": 0},
            "swiglu_alpha": 1.5, "swiglu_limit": 5.0, "attention_bias": False,
            "tie_word_embeddings": True, "eos_token_id": [1, 2], "torch_dtype": "float32"},
        "yarn_attention_factor": {
            "model_type": "gpt_oss", "num_hidden_layers": 2, "max_position_embeddings": 8192,
            "rope_parameters": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.25,
                                "original_max_position_embeddings": 2048, "rope_theta": 5e5}},
        "default_rope": {"model_type": "gpt_oss", "num_hidden_layers": 2,
                         "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}},
    }


def expected_values(raw: dict) -> dict:
    c = GptOssConfig.from_dict(raw)
    rope = c.rope_parameters
    out = {
        "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size, "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads, "head_dim": c.head_dim,
        "num_local_experts": c.num_local_experts, "num_experts_per_tok": c.num_experts_per_tok,
        "sliding_window": c.sliding_window, "layer_types": c.layer_types,
        "max_position_embeddings": c.max_position_embeddings, "rms_norm_eps": c.rms_norm_eps,
        "swiglu_alpha": c.swiglu_alpha, "swiglu_limit": c.swiglu_limit,
        "attention_bias": c.attention_bias, "tie_word_embeddings": c.tie_word_embeddings,
        "router_aux_loss_coef": c.router_aux_loss_coef,
        "output_router_logits": c.output_router_logits,
        "mxfp4": (getattr(c, "quantization_config", None) or {}).get("quant_method") == "mxfp4",
        "eos_token_id": c.eos_token_id, "pad_token_id": c.pad_token_id,
        "rope_type": rope["rope_type"], "rope_theta": rope["rope_theta"],
    }
    if rope["rope_type"] == "yarn":
        # The values _compute_yarn_parameters uses (its own defaults applied).
        out.update(factor=rope["factor"], beta_fast=rope.get("beta_fast") or 32,
                   beta_slow=rope.get("beta_slow") or 1,
                   truncate=rope.get("truncate", True),
                   original_max_position_embeddings=rope["original_max_position_embeddings"])
    out["attention_factor"] = ROPE_INIT_FUNCTIONS[rope["rope_type"]](c, "cpu")[1] \
        if rope["rope_type"] != "default" else 1.0
    return out


def make_configs(out: str) -> None:
    config_dir = os.path.join(out, "configs")
    os.makedirs(config_dir, exist_ok=True)
    expected = {}
    for name, raw in config_variants().items():
        with open(os.path.join(config_dir, name + ".json"), "w") as f:
            json.dump(raw, f, indent=1)
        expected[name] = expected_values(raw)
    with open(os.path.join(config_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


def make(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    make_configs(out)
    make_checkpoints(out)


if __name__ == "__main__":
    make(sys.argv[1])
