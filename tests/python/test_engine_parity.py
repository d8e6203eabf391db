"""Parity of air's C++ engine with transformers, number for number, in fp32.

For each tiny model kind (tests/python/engine_ref/tiny_models.py) transformers creates and
saves the model; the test-only tool air_engine_dump (tests/tools/engine_dump.cc, built beside
build/bin/air) loads it with air's engine, runs Forward/Backward on the same batch and writes
logits, loss and every parameter gradient to a safetensors file, which is compared here with
transformers' own forward/backward:
  logits max |delta|, loss relative delta and each grad ||delta||/||g||, each printed and held
  to about 10x the worst value measured on this machine (the constants below, with the figures
  they came from), on rows of SEQ = 136 tokens: longer than one 64-query attention block of
  the fast kernels, so block edges are inside the checked sequence.
Also: KV-cache decoding reproduces the full forward's logits, a packed row (segment ids)
equals the documents run separately, activation checkpointing changes nothing, and a
checkpoint saved by air (single file, sharded, bf16) loads in transformers with the same
logits.
"""
import json
import pathlib
import subprocess

import pytest
import torch
from safetensors.torch import load_file

from engine_ref.parity import SEQ, hf_forward_backward, padded_batch, run_dump, write_batch
from engine_ref.tiny_models import KINDS, load_model, make_model

# Worst measured over the five models, both op sets, the packed and init cases (see
# docs/engine-model.md "How parity is checked"); the tolerances are ~10x those.
LOGITS_TOL = 2e-5      # measured 1.97e-6 (llama_gqa_llama3, reference ops)
LOSS_REL_TOL = 2e-6    # measured 1.60e-7 (mistral_window)
GRAD_REL_TOL = 1.2e-5  # measured 1.18e-6 (qwen3 q_proj.weight, reference ops)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """kind -> directory of the saved transformers model (made once per session)."""
    root = tmp_path_factory.mktemp("tiny_models")
    out = {}
    for i, kind in enumerate(KINDS):
        make_model(kind, root / kind, seed=100 + i)
        out[kind] = root / kind
    return out


def assert_grads_match(air, hf_grads, model):
    names = {n for n, _ in model.named_parameters()}
    air_names = {k[len("grad."):] for k in air if k.startswith("grad.")}
    assert air_names == names, f"parameter sets differ: {air_names ^ names}"
    worst = (0.0, "")
    for name, g in hf_grads.items():
        delta = (air["grad." + name] - g).norm().item()
        rel = delta / max(g.norm().item(), 1e-30)
        worst = max(worst, (rel, name))
        assert rel <= GRAD_REL_TOL, f"{name}: ||delta||/||g|| = {rel:.2e}"
    print(f"[parity] worst grad ||delta||/||g|| = {worst[0]:.2e} ({worst[1]})")
    return worst


def check_logits(what, delta):
    print(f"[parity] {what} max |delta| = {delta:.2e} (tolerance {LOGITS_TOL:.0e})")
    assert delta <= LOGITS_TOL, f"{what} max |delta| = {delta:.2e}"


def check_loss(air_loss, hf_loss):
    rel = abs(air_loss - hf_loss) / abs(hf_loss)
    print(f"[parity] loss relative delta = {rel:.2e} (tolerance {LOSS_REL_TOL:.0e})")
    assert rel <= LOSS_REL_TOL, f"loss {air_loss} vs {hf_loss}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ops", ["fast", "reference"])
def test_forward_backward_and_decode_match_transformers(kind, ops, models, dump_bin, tmp_path):
    model = load_model(models[kind])
    ids, mask, labels, positions, segments = padded_batch(model.config.vocab_size)
    batch_path = tmp_path / "batch.json"
    write_batch(batch_path, ids, labels, positions, segments)
    air = run_dump(dump_bin, models[kind], batch_path, tmp_path / "dump.safetensors",
                   "--ops", ops, "--decode")
    hf_logits, hf_loss, hf_grads = hf_forward_backward(model, ids, mask, labels)

    real = mask.bool()  # logits at padding positions are not defined the same way
    print(f"[parity] {kind} / {ops}:")
    check_logits("logits", (air["logits"] - hf_logits)[real].abs().max().item())
    check_logits("KV-cache logits", (air["decode_logits"] - hf_logits)[real].abs().max().item())
    check_loss(air["loss"].item(), hf_loss)
    assert int(air["loss_tokens"].item()) == int((labels[:, 1:] != -100).sum())
    assert_grads_match(air, hf_grads, model)


def test_sliding_window_matters(models):
    """Guards the Mistral case against being vacuous: the window changes the logits."""
    model = load_model(models["mistral_window"])
    ids, mask, _, _, _ = padded_batch(model.config.vocab_size)
    windowed = model(input_ids=ids, attention_mask=mask).logits
    model.config.sliding_window = None
    full = load_model(models["mistral_window"])
    full.config.sliding_window = None
    for layer in full.model.layers:
        layer.self_attn.sliding_window = None
    unwindowed = full(input_ids=ids, attention_mask=mask).logits
    assert (windowed - unwindowed)[mask.bool()].abs().max().item() > 1e-3


def test_activation_checkpointing_gives_identical_gradients(models, dump_bin, tmp_path):
    model_dir = models["qwen3"]
    vocab = load_model(model_dir).config.vocab_size
    ids, _, labels, positions, segments = padded_batch(vocab)
    batch_path = tmp_path / "batch.json"
    write_batch(batch_path, ids, labels, positions, segments)
    plain = run_dump(dump_bin, model_dir, batch_path, tmp_path / "a.safetensors")
    ckpt = run_dump(dump_bin, model_dir, batch_path, tmp_path / "b.safetensors",
                    "--checkpointing")
    for key, value in plain.items():
        assert torch.equal(value, ckpt[key]), f"{key} differs under activation checkpointing"


@pytest.mark.parametrize("kind", ["llama_gqa_llama3", "mistral_window"])
def test_packed_row_equals_documents_run_separately(kind, models, dump_bin, tmp_path):
    """One row holding two documents (segment ids 1 and 2, positions restarting) must give the
    logits, loss and gradients of the two documents run as separate rows in transformers."""
    model = load_model(models[kind])
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(11)
    len_a, len_b = 10, SEQ - 10
    doc_a = torch.randint(0, vocab, (len_a,), generator=g)
    doc_b = torch.randint(0, vocab, (len_b,), generator=g)
    packed_ids = torch.cat([doc_a, doc_b]).unsqueeze(0)
    packed_labels = packed_ids.clone()
    packed_labels[0, len_a] = -100  # never predict document B's first token from A
    positions = torch.cat([torch.arange(len_a), torch.arange(len_b)]).unsqueeze(0)
    segments = torch.cat([torch.full((len_a,), 1), torch.full((len_b,), 2)]).unsqueeze(0)
    batch_path = tmp_path / "packed.json"
    write_batch(batch_path, packed_ids, packed_labels, positions, segments)
    air = run_dump(dump_bin, models[kind], batch_path, tmp_path / "packed.safetensors")

    ids = torch.zeros(2, len_b, dtype=torch.long)
    mask = torch.zeros(2, len_b, dtype=torch.long)
    ids[0, :len_a], mask[0, :len_a] = doc_a, 1
    ids[1], mask[1] = doc_b, 1
    labels = ids.clone()
    labels[mask == 0] = -100
    hf_logits, hf_loss, hf_grads = hf_forward_backward(model, ids, mask, labels)

    air_logits = air["logits"][0]
    delta_a = (air_logits[:len_a] - hf_logits[0, :len_a]).abs().max().item()
    delta_b = (air_logits[len_a:] - hf_logits[1]).abs().max().item()
    print(f"[parity] packed {kind}:")
    check_logits("logits", max(delta_a, delta_b))
    check_loss(air["loss"].item(), hf_loss)
    assert_grads_match(air, hf_grads, model)


@pytest.mark.parametrize("kind", ["llama_tied", "qwen2", "qwen3"])
@pytest.mark.parametrize("layout", ["single", "sharded", "bf16"])
def test_checkpoint_saved_by_air_loads_in_transformers(kind, layout, models, dump_bin,
                                                       tmp_path):
    src = models[kind]
    out = tmp_path / "saved"
    extra = {"single": [], "sharded": ["--max-shard-bytes", "60000"],
             "bf16": ["--save-dtype", "BF16"]}[layout]
    proc = subprocess.run([dump_bin, "--model", str(src), "--save", str(out), *extra],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in out.iterdir())
    assert "config.json" in files and "generation_config.json" in files
    if layout == "sharded":
        assert "model.safetensors.index.json" in files
        assert sum(name.endswith(".safetensors") for name in files) > 2
    else:
        assert "model.safetensors" in files

    original = load_model(src)
    ids, mask, _, _, _ = padded_batch(original.config.vocab_size)
    with torch.no_grad():
        want = original(input_ids=ids, attention_mask=mask).logits
    if layout == "bf16":
        reloaded = load_model(out, dtype=torch.bfloat16)
        for (name, p), (_, q) in zip(original.named_parameters(), reloaded.named_parameters()):
            assert torch.equal(p.detach().to(torch.bfloat16), q.detach()), name
        return
    reloaded = load_model(out)
    assert reloaded.config.tie_word_embeddings == original.config.tie_word_embeddings
    with torch.no_grad():
        got = reloaded(input_ids=ids, attention_mask=mask).logits
    # The same fp32 weights: transformers computes exactly the same logits.
    assert torch.equal(got, want)


# ---- air model init / inspect, and bad input ---------------------------------------------

TINY_YAML = """\
architectures: [LlamaForCausalLM]
vocab_size: 300
hidden_size: 64
intermediate_size: 128
num_hidden_layers: 2
num_attention_heads: 4
num_key_value_heads: 2
tie_word_embeddings: true
rope_parameters: {rope_type: llama3, rope_theta: 500000.0, factor: 8.0,
                  low_freq_factor: 1.0, high_freq_factor: 4.0,
                  original_max_position_embeddings: 64}
bos_token_id: 1
eos_token_id: 2
"""


def test_model_init_writes_a_model_transformers_loads(air, tmp_path, dump_bin):
    (tmp_path / "tiny.yaml").write_text(TINY_YAML)
    out = tmp_path / "m"
    code, env = air.json("model", "init", "--config", tmp_path / "tiny.yaml", "--out", out,
                         "--seed", "3")
    assert code == 0, env
    assert env["data"]["architecture"] == "LlamaForCausalLM"
    assert sorted(env["data"]["files"]) == ["config.json", "generation_config.json",
                                            "model.safetensors"]
    model = load_model(out)
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_key_value_heads, cfg.tie_word_embeddings) == (64, 2, True)
    assert cfg.rope_parameters["rope_type"] == "llama3"
    assert sum(p.numel() for p in model.parameters()) == env["data"]["parameters"]
    weights = model.model.layers[0].self_attn.q_proj.weight.detach()
    assert abs(weights.std().item() - 0.02) < 0.002 and abs(weights.mean().item()) < 0.002
    assert torch.equal(model.model.norm.weight.detach(), torch.ones(64))
    # Deterministic by seed; a different seed gives different weights.
    air("model", "init", "--config", tmp_path / "tiny.yaml", "--out", tmp_path / "again",
        "--seed", "3", check=True)
    air("model", "init", "--config", tmp_path / "tiny.yaml", "--out", tmp_path / "other",
        "--seed", "4", check=True)
    first = (out / "model.safetensors").read_bytes()
    assert first == (tmp_path / "again" / "model.safetensors").read_bytes()
    assert first != (tmp_path / "other" / "model.safetensors").read_bytes()
    # And air's engine agrees with transformers on the model air created.
    ids, mask, labels, positions, segments = padded_batch(cfg.vocab_size)
    write_batch(tmp_path / "b.json", ids, labels, positions, segments)
    got = run_dump(dump_bin, out, tmp_path / "b.json", tmp_path / "d.safetensors")
    hf_logits, hf_loss, hf_grads = hf_forward_backward(model, ids, mask, labels)
    print("[parity] model init:")
    check_logits("logits", (got["logits"] - hf_logits)[mask.bool()].abs().max().item())
    check_loss(got["loss"].item(), hf_loss)
    assert_grads_match(got, hf_grads, model)


def test_model_init_json_qwen3_sharded_bf16(air, tmp_path):
    config = {"architectures": ["Qwen3ForCausalLM"], "vocab_size": 256, "hidden_size": 64,
              "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 32}
    (tmp_path / "q3.json").write_text(json.dumps(config))
    out = tmp_path / "q3"
    air("model", "init", "--config", tmp_path / "q3.json", "--out", out, "--dtype", "bfloat16",
        "--max-shard-size", "40KB", check=True)
    assert (out / "model.safetensors.index.json").exists()
    model = load_model(out, dtype=torch.bfloat16)
    assert model.config.head_dim == 32
    assert model.model.layers[1].self_attn.q_norm.weight.dtype == torch.bfloat16
    proc = air("model", "inspect", out, check=True)
    assert "all tensors present and valid" in proc.stdout and "BF16" in proc.stdout


def test_model_init_rejects_bad_configs(air, tmp_path):
    cases = {
        "arch.yaml": ("architectures: [GPT2LMHeadModel]\nvocab_size: 3\n",
                      ["GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM",
                       "Qwen3ForCausalLM", "MistralForCausalLM"]),
        "typo.yaml": (TINY_YAML + "num_key_value_head: 2\n",
                      ["'num_key_value_head'", "did you mean 'num_key_value_heads'"]),
        "type.yaml": (TINY_YAML.replace("hidden_size: 64", "hidden_size: big"),
                      ["'hidden_size' must be an integer"]),
        "heads.yaml": (TINY_YAML.replace("num_key_value_heads: 2", "num_key_value_heads: 3"),
                       ["multiple of num_key_value_heads"]),
        "syntax.yaml": ("vocab_size: [1, 2\n", ["syntax.yaml:2:1"]),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
        proc = air("model", "init", "--config", tmp_path / name, "--out", tmp_path / "x")
        assert proc.returncode == 2, (name, proc.stderr)
        for piece in expected:
            assert piece in proc.stderr, (name, proc.stderr)
        assert name in proc.stderr
    assert not (tmp_path / "x").exists()


def corrupt_copies(src: pathlib.Path, root: pathlib.Path):
    """(name, directory, substrings the error must contain) for each kind of bad model."""
    import shutil
    from safetensors.torch import save_file

    def copy(name):
        d = root / name
        shutil.copytree(src, d)
        return d

    weights = load_file(str(src / "model.safetensors"))
    cases = []
    d = copy("truncated")
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) - 1000])
    cases.append(("truncated", d, [str(d / "model.safetensors"), "truncated"]))
    d = copy("corrupt_header")
    data = bytearray((d / "model.safetensors").read_bytes())
    data[8:20] = b"\x00garbage!!\xff\xfe"
    (d / "model.safetensors").write_bytes(bytes(data))
    cases.append(("corrupt_header", d, [str(d / "model.safetensors"), "header"]))
    d = copy("missing_tensor")
    missing = "model.layers.1.mlp.up_proj.weight"
    save_file({k: v for k, v in weights.items() if k != missing}, str(d / "model.safetensors"))
    cases.append(("missing_tensor", d, [f"'{missing}'", str(d / "model.safetensors"), "missing"]))
    d = copy("shape_mismatch")
    bad = dict(weights)
    bad["model.norm.weight"] = torch.ones(63)
    save_file(bad, str(d / "model.safetensors"))
    cases.append(("shape_mismatch", d, ["'model.norm.weight'", "[63]", "[64]",
                                        str(d / "model.safetensors")]))
    d = copy("unknown_arch")
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"] = ["FalconForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    cases.append(("unknown_arch", d, ["FalconForCausalLM", "LlamaForCausalLM",
                                      "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                      "MistralForCausalLM", str(d / "config.json")]))
    d = copy("no_weights")
    (d / "model.safetensors").unlink()
    cases.append(("no_weights", d, ["model.safetensors", "model.safetensors.index.json"]))
    return cases


def test_bad_model_files_are_clear_errors_not_crashes(air, models, dump_bin, tmp_path):
    for name, model_dir, expected in corrupt_copies(models["qwen2"], tmp_path):
        for command in (["model", "inspect", model_dir],):
            proc = air(*command)
            assert proc.returncode in (1, 2), (name, proc.returncode, proc.stderr)
            for piece in expected:
                assert piece in proc.stderr, (name, piece, proc.stderr)
        # The engine's loader (what air train uses) reports the same, without crashing.
        proc = subprocess.run([dump_bin, "--model", str(model_dir)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 1, (name, proc.returncode, proc.stderr)
        for piece in expected:
            assert piece in proc.stderr, (name, piece, proc.stderr)


def test_model_name_not_found_lists_where_it_looked(air, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    proc = air("model", "inspect", "some-org/some-model")
    assert proc.returncode == 1
    assert "some-org/some-model" in proc.stderr
    assert str(tmp_path / "hf" / "hub" / "models--some-org--some-model") in proc.stderr


def test_model_name_resolves_through_the_hub_cache(air, models, tmp_path, monkeypatch):
    import shutil
    repo = tmp_path / "hf" / "hub" / "models--tiny-org--tiny-llama"
    shutil.copytree(models["llama_gqa_llama3"], repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    code, env = air.json("model", "inspect", "tiny-org/tiny-llama")
    assert code == 0, env
    assert env["data"]["dir"].endswith("snapshots/0123abcd")
    assert env["data"]["rope_type"] == "llama3"
