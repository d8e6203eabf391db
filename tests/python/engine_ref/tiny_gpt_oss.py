"""Tiny random GptOssForCausalLM models made and saved by transformers itself (fp32), as the
issue asks: 2 layers, 4 experts top-2, sliding window 8 on the sliding layers, non-zero sinks,
YaRN. Two kinds:
  released   the released files' settings at a tiny size: YaRN with truncate false, swiglu_limit
             7, attention biases, layer_types alternating sliding/full
  clamped    swiglu_limit 0.5 (so the clamps of gate and up act on many values), YaRN with
             truncate true and an explicit attention_factor, full attention first
Weights are re-drawn after construction (no norm at 1, no bias at 0, sinks of order 1, a router
with clear top-k gaps), so every gradient is exercised. transformers runs the experts with its
eager loop (experts_implementation="eager", one GEMM per routed expert) and eager attention.
"""
import pathlib

import torch
import transformers

KINDS = ["released", "clamped"]


def make_config(kind: str, vocab: int = 320):
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
                  max_position_embeddings=256, rms_norm_eps=1e-5, attention_bias=True,
                  pad_token_id=0, eos_token_id=2, bos_token_id=1, tie_word_embeddings=False)
    if kind == "released":
        return transformers.GptOssConfig(
            **common, swiglu_limit=7.0, layer_types=["sliding_attention", "full_attention"],
            rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 8.0,
                             "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                             "original_max_position_embeddings": 32})
    if kind == "clamped":
        return transformers.GptOssConfig(
            **common, swiglu_limit=0.5, layer_types=["full_attention", "sliding_attention"],
            rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                             "beta_fast": 16.0, "beta_slow": 2.0, "truncate": True,
                             "attention_factor": 1.25, "original_max_position_embeddings": 64})
    raise ValueError(kind)


def redraw(model, seed: int):
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("sinks"):
                p.copy_(torch.randn_like(p))
            elif "bias" in name:
                p.copy_(0.05 * torch.randn_like(p))
            elif "router" in name:
                p.copy_(0.3 * torch.randn_like(p))
            elif "experts" in name:
                p.copy_(0.15 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))


def make_model(kind: str, out_dir: pathlib.Path, seed: int = 0, vocab: int = 320):
    """Builds the model, re-draws its weights from `seed`, saves it to out_dir (fp32)."""
    torch.manual_seed(seed)
    model = transformers.GptOssForCausalLM(make_config(kind, vocab)).float()
    redraw(model, seed)
    model.save_pretrained(out_dir)
    return model


def load_model(model_dir, dtype=torch.float32):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=dtype, attn_implementation="eager", experts_implementation="eager")
    model.eval()
    return model
