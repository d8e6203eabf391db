"""The model shapes and the recipes bench/gpu/bench.py measures, and the arithmetic on them
(parameter counts, training FLOPs per token, MFU).

Each shape is a config.json-style dict, written once to a file every side builds or loads its
model from, so air and PyTorch train exactly the same architecture. Two families:
  llama    transformers' LlamaConfig keys (the 4.x rope spelling that both transformers 5 and
           `air model init` read): the first seed's full fine-tuning (SEED_RECIPE)
  gpt_oss  GptOssConfig keys: the second seed's LoRA (LORA_RECIPE); a mixture of experts, so
           its MFU counts the parameters a token goes through (the active ones)
"""
import json
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]


# Llama 3 RoPE scaling as the released configs carry it (factor 32 for 3.2-1B, 8 for 3.1-8B).
def _llama3_rope(factor):
    return {"factor": factor, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"}


_COMMON = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
           "attention_bias": False, "mlp_bias": False, "initializer_range": 0.02,
           "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 131072,
           "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16"}


def _gpt_oss_20b():
    """openai/gpt-oss-20b's config.json (tests/data/gpt_oss/configs/released_20b.json, the copy
    air's own config tests read: 24 layers, hidden 2880, 32 experts top-4 of width 2880, 64 query
    / 8 key-value heads of 64, attention biases, sinks, sliding window 128 on every other layer,
    YaRN factor 32, vocab 201088) without its quantization_config: a random init has no MXFP4
    blocks to keep, so the experts are bf16 like everything else (41.8 GB of weights)."""
    cfg = json.loads((REPO / "tests/data/gpt_oss/configs/released_20b.json").read_text())
    cfg.pop("quantization_config", None)
    cfg.pop("transformers_version", None)
    return dict(cfg, torch_dtype="bfloat16")


SHAPES = {
    # meta-llama/Llama-3.2-1B's config.json
    "llama-1b": dict(_COMMON, vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                     num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=64, tie_word_embeddings=True, rope_scaling=_llama3_rope(32.0)),
    # meta-llama/Llama-3.1-8B's config.json
    "llama-8b": dict(_COMMON, vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                     num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=128, tie_word_embeddings=False, rope_scaling=_llama3_rope(8.0)),
    # --tiny (the CPU smoke mode): the same architecture, GQA and llama3 RoPE, a few MB.
    "tiny": dict(_COMMON, vocab_size=512, hidden_size=64, intermediate_size=128,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, tie_word_embeddings=True, rope_scaling=_llama3_rope(32.0),
                 bos_token_id=1, eos_token_id=2),
    "gpt-oss-20b": _gpt_oss_20b(),
    # The CPU smoke shape of the GPT-OSS sides: every feature of the 20B (experts top-k, sinks,
    # biases, a sliding window shorter than its rows on every other layer, YaRN), a few MB.
    "gpt-oss-tiny": {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 512,
        "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_local_experts": 4, "num_experts_per_tok": 2, "experts_per_token": 2,
        "sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"],
        "attention_bias": True, "attention_dropout": 0.0, "hidden_act": "silu",
        "swiglu_limit": 7.0, "rms_norm_eps": 1e-5, "initializer_range": 0.02,
        "max_position_embeddings": 4096, "initial_context_length": 128, "rope_theta": 150000,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "original_max_position_embeddings": 128,
                         "truncate": False},
        "router_aux_loss_coef": 0.9, "output_router_logits": False,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "torch_dtype": "bfloat16"},
}


def family(cfg):
    return "gpt_oss" if cfg.get("model_type") == "gpt_oss" else "llama"


class Recipe:
    """A training recipe: rows per micro-batch, tokens per row, micro-batches per optimizer step,
    AdamW's learning rate and weight decay, the clipping norm, and (LoRA) PEFT's LoraConfig as a
    dict {r, alpha, dropout, target_modules}, or None for full fine-tuning."""

    def __init__(self, batch=4, seq=1024, accum=2, lr=2e-5, weight_decay=0.0, clip=1.0,
                 lora=None):
        self.batch, self.seq, self.accum = batch, seq, accum
        self.lr, self.weight_decay, self.clip, self.lora = lr, weight_decay, clip, lora

    @property
    def tokens_per_step(self):
        return self.batch * self.seq * self.accum

    def rows(self, steps):
        """Rows of `seq` tokens that `steps` optimizer steps consume."""
        return self.batch * self.accum * steps

    def describe(self):
        lora = self.lora
        head = (f"LoRA r {lora['r']} alpha {lora['alpha']:g} dropout {lora['dropout']:g} "
                f"{lora['target_modules']} over a frozen bf16 base" if lora else "bf16 weights")
        return (f"{head}; batch {self.batch} x {self.seq} tokens, gradient accumulation "
                f"{self.accum} ({self.tokens_per_step} tokens/step); AdamW lr {self.lr:g}, "
                f"weight decay {self.weight_decay:g}; clip {self.clip:g}")


# The first seed: batch 4 x 1024, accumulation 2, lr 2e-5.
SEED_RECIPE = Recipe()
TINY_RECIPE = Recipe(batch=2, seq=64, accum=2, lr=1e-3)
# The second seed (shared/seeds/002): LoraConfig(r=16, lora_alpha=16, target_modules=
# "all-linear", lora_dropout=0.05, bias="none"), MAX_LENGTH 2048, PER_DEVICE_BATCH 1, GRAD_ACCUM
# 4, LR 1.5e-4, SFTConfig's defaults for the rest (weight decay 0, max_grad_norm 1.0). Its
# cosine schedule with 3% warm-up is constant here: it changes no step's cost.
SEED2_LORA = {"r": 16, "alpha": 16.0, "dropout": 0.05, "target_modules": "all-linear"}
LORA_RECIPE = Recipe(batch=1, seq=2048, accum=4, lr=1.5e-4, lora=SEED2_LORA)
TINY_LORA_RECIPE = Recipe(batch=1, seq=64, accum=2, lr=1e-3, lora=SEED2_LORA)

RECIPES = {"llama-1b": SEED_RECIPE, "llama-8b": SEED_RECIPE, "tiny": TINY_RECIPE,
           "gpt-oss-20b": LORA_RECIPE, "gpt-oss-tiny": TINY_LORA_RECIPE}


def _dims(cfg):
    h = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    return h, cfg["num_attention_heads"] * head_dim, cfg["num_key_value_heads"] * head_dim


def _layer_parameters(cfg, experts):
    """One decoder layer's parameters with `experts` experts counted (GPT-OSS) or the MLP."""
    h, q, kv = _dims(cfg)
    inter = cfg["intermediate_size"]
    attention = h * q + 2 * h * kv + q * h
    if family(cfg) == "llama":
        return attention + 3 * h * inter + 2 * h  # q k v o, gate up down, 2 norms
    attention += q + 2 * kv + h + cfg["num_attention_heads"]  # biases, sinks
    e = cfg["num_local_experts"]
    router = e * h + e
    expert = h * 2 * inter + 2 * inter + inter * h + h  # gate_up, down and their biases
    return attention + router + experts * expert + 2 * h


def parameter_count(cfg):
    """Every parameter (embeddings and head included), as sum(p.numel()) counts them."""
    experts = cfg.get("num_local_experts", 0)
    return _count(cfg, experts)


def active_parameter_count(cfg):
    """The parameters one token goes through: every expert-free parameter and the top-k experts
    of each layer (num_experts_per_tok of num_local_experts); all of them for a dense model."""
    return _count(cfg, cfg.get("num_experts_per_tok", 0))


def _count(cfg, experts):
    h = cfg["hidden_size"]
    embed = cfg["vocab_size"] * h
    head = 0 if cfg["tie_word_embeddings"] else embed
    return embed + head + cfg["num_hidden_layers"] * _layer_parameters(cfg, experts) + h


def attention_context(cfg, seq):
    """The keys a query sees per layer, summed over the layers: T on a full-attention layer,
    min(window, T) on a sliding one (GPT-OSS's layer_types); L·T for Llama."""
    layers = cfg.get("layer_types") or ["full_attention"] * cfg["num_hidden_layers"]
    window = cfg.get("sliding_window") or seq
    return sum(min(window, seq) if t == "sliding_attention" else seq for t in layers)


def flops_per_token(cfg, seq):
    """6·N_active + 12·d_attn·ΣT_l: the training FLOPs per token (forward 2, backward 4 per
    parameter a token goes through, embeddings and head included; QKᵀ and AV at 12·d_attn per
    key, d_attn = heads x head_dim, over each layer's context T_l). For Llama (N_active = N,
    d_attn = H, T_l = T) that is the issue's 6·N + 12·L·H·T. LoRA's frozen base computes no
    weight gradients (4·N would be its work), but the convention counts 6·N for it too."""
    _, q, _ = _dims(cfg)
    return 6 * active_parameter_count(cfg) + 12 * q * attention_context(cfg, seq)


def mfu(cfg, seq, tokens_per_s, peak_flops):
    return flops_per_token(cfg, seq) * tokens_per_s / peak_flops


def describe(name, cfg):
    n = parameter_count(cfg)
    head = (f"{name}: hidden {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers, "
            f"{cfg['num_attention_heads']} heads / {cfg['num_key_value_heads']} kv, ")
    if family(cfg) == "llama":
        body = f"intermediate {cfg['intermediate_size']}, "
    else:
        body = (f"{cfg['num_local_experts']} experts top-{cfg['num_experts_per_tok']} of width "
                f"{cfg['intermediate_size']}, sliding window {cfg['sliding_window']} on "
                f"{cfg['layer_types'].count('sliding_attention')} layers, sinks, YaRN, ")
    tail = (f"vocab {cfg['vocab_size']}, "
            f"{'tied' if cfg['tie_word_embeddings'] else 'untied'} embeddings, "
            f"{n / 1e9:.3f} B parameters")
    if family(cfg) == "gpt_oss":
        tail += f" ({active_parameter_count(cfg) / 1e9:.3f} B active)"
    return head + body + tail
