"""The model shapes and the recipe bench/gpu/bench.py measures, and the arithmetic on them
(parameter count, training FLOPs per token, MFU).

Each shape is a config.json-style dict (transformers' LlamaConfig keys, the 4.x rope spelling
that both transformers 5 and `air model init` read), written once to a file both sides build
their model from, so air and PyTorch train exactly the same architecture.
"""

# Llama 3 RoPE scaling as the released configs carry it (factor 32 for 3.2-1B, 8 for 3.1-8B).
def _llama3_rope(factor):
    return {"factor": factor, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"}


_COMMON = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
           "attention_bias": False, "mlp_bias": False, "initializer_range": 0.02,
           "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 131072,
           "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16"}

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
}


class Recipe:
    """The first seed's training recipe: rows per micro-batch, tokens per row, micro-batches per
    optimizer step, AdamW's learning rate and weight decay, the clipping norm."""

    def __init__(self, batch=4, seq=1024, accum=2, lr=2e-5, weight_decay=0.0, clip=1.0):
        self.batch, self.seq, self.accum = batch, seq, accum
        self.lr, self.weight_decay, self.clip = lr, weight_decay, clip

    @property
    def tokens_per_step(self):
        return self.batch * self.seq * self.accum

    def rows(self, steps):
        """Rows of `seq` tokens that `steps` optimizer steps consume."""
        return self.batch * self.accum * steps

    def describe(self):
        return (f"bf16 weights; batch {self.batch} x {self.seq} tokens, gradient accumulation "
                f"{self.accum} ({self.tokens_per_step} tokens/step); AdamW lr {self.lr:g}, "
                f"weight decay {self.weight_decay:g}; clip {self.clip:g}")


SEED_RECIPE = Recipe()
TINY_RECIPE = Recipe(batch=2, seq=64, accum=2, lr=1e-3)


def parameter_count(cfg):
    """Every parameter (embeddings and head included), as sum(p.numel()) counts them."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    head_dim = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q = cfg["num_attention_heads"] * head_dim
    kv = cfg["num_key_value_heads"] * head_dim
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * inter + 2 * h  # attention, MLP, 2 norms
    embed = cfg["vocab_size"] * h
    head = 0 if cfg["tie_word_embeddings"] else embed
    return embed + head + layers * per_layer + h  # + the final norm


def flops_per_token(cfg, seq):
    """6·N + 12·L·H·T: the training FLOPs per token of the issue's MFU formula (N all
    parameters, L layers, H hidden size, T sequence length)."""
    return (6 * parameter_count(cfg)
            + 12 * cfg["num_hidden_layers"] * cfg["hidden_size"] * seq)


def mfu(cfg, seq, tokens_per_s, peak_flops):
    return flops_per_token(cfg, seq) * tokens_per_s / peak_flops


def describe(name, cfg):
    n = parameter_count(cfg)
    return (f"{name}: hidden {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers, "
            f"{cfg['num_attention_heads']} heads / {cfg['num_key_value_heads']} kv, "
            f"intermediate {cfg['intermediate_size']}, vocab {cfg['vocab_size']}, "
            f"{'tied' if cfg['tie_word_embeddings'] else 'untied'} embeddings, "
            f"{n / 1e9:.3f} B parameters")
