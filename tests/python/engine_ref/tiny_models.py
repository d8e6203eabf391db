"""Tiny random-init Llama-family models made and saved by transformers itself (fp32).

Each kind exercises one architectural feature the C++ engine must match:
  llama_gqa_llama3  Llama, grouped-query attention, llama3 RoPE scaling (all three regimes:
                    with head_dim 16 and theta 5e5 the wavelengths 6, 32, 167, ... fall below,
                    inside and above the [16, 64] band)
  llama_tied        Llama with tied embeddings, plain MHA, attention and MLP biases
  qwen2             Qwen2: bias on q/k/v
  qwen3             Qwen3: q/k RMSNorm over head_dim, head_dim != hidden/heads
  mistral_window    Mistral with a sliding window shorter than the test sequence

Weights are re-drawn after construction so that nothing is trivially zero or one (HF would
start biases at 0 and norm weights at 1, which would hide bugs in their gradients).
"""
import pathlib

import torch
import transformers

SMALL = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, vocab_size=320, max_position_embeddings=256,
             rms_norm_eps=1e-5)


def make_config(kind: str):
    if kind == "llama_gqa_llama3":
        return transformers.LlamaConfig(
            **SMALL, num_key_value_heads=2, rope_theta=500000.0,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    if kind == "llama_tied":
        return transformers.LlamaConfig(**SMALL, num_key_value_heads=4, tie_word_embeddings=True,
                                        attention_bias=True, mlp_bias=True)
    if kind == "qwen2":
        return transformers.Qwen2Config(**SMALL, num_key_value_heads=2, rope_theta=1000000.0)
    if kind == "qwen3":
        return transformers.Qwen3Config(**SMALL, num_key_value_heads=2, head_dim=32)
    if kind == "mistral_window":
        return transformers.MistralConfig(**SMALL, num_key_value_heads=1, sliding_window=5)
    raise ValueError(kind)


KINDS = ["llama_gqa_llama3", "llama_tied", "qwen2", "qwen3", "mistral_window"]


def make_model(kind: str, out_dir: pathlib.Path, seed: int = 0):
    """Builds the model, re-draws its weights from `seed`, saves it to out_dir (fp32)."""
    torch.manual_seed(seed)
    config = make_config(kind)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model = model.float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.05 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))
    model.save_pretrained(out_dir)
    return model


def load_model(model_dir, dtype=torch.float32):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=dtype, attn_implementation="eager")
    model.eval()
    return model
