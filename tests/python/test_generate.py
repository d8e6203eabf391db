"""`air generate`: greedy decoding with the KV cache gives the same tokens as transformers'
generate(do_sample=False) on a model transformers saved; sampling is reproducible by seed and
differs across seeds; generation stops at eos; bad flags are exit code 2 with the flag named.
"""
import json

import pytest

import torch  # a missing reference fails, never skips
import transformers  # a missing reference fails, never skips

from test_train_cli import make_tokenizer  # noqa: E402  (same directory; pytest puts it on sys.path)

PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("gen") / "tiny"
    make_tokenizer(d, chat=True)
    torch.manual_seed(3)
    config = transformers.LlamaConfig(
        vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        bos_token_id=0, eos_token_id=1, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # sharper logits than the 0.02 init: fewer near-ties in the argmax
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.2)
    model.save_pretrained(d, safe_serialization=True)
    return d


def hf_greedy(model_dir, prompt, n):
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = tok(prompt, return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=None,
                         pad_token_id=1)
    return ids[0].tolist(), out[0, ids.shape[1]:].tolist(), tok


def test_greedy_matches_transformers(air, model_dir):
    prompt_ids, want, tok = hf_greedy(model_dir, PROMPT, 24)
    code, env = air.json("generate", "--model", model_dir, "--prompt", PROMPT,
                         "--max-new-tokens", 24)
    assert code == 0, env
    data = env["data"]
    assert data["prompt_tokens"] == len(prompt_ids)
    # transformers did not stop at eos (eos_token_id=None); compare up to air's stop.
    got = data["token_ids"]
    assert got == want[:len(got)]
    if data["stopped_at_eos"]:
        assert got[-1] == 1
    else:
        assert len(got) == 24
    assert data["text"] == tok.decode(got, skip_special_tokens=True)


def test_text_mode_streams_the_continuation(air, model_dir):
    proc = air("generate", "--model", model_dir, "--prompt", PROMPT, "--max-new-tokens", 10)
    assert proc.returncode == 0, proc.stderr
    _, env = air.json("generate", "--model", model_dir, "--prompt", PROMPT, "--max-new-tokens", 10)
    assert proc.stdout.rstrip("\n") == env["data"]["text"].rstrip("\n")
    assert "new tokens" in proc.stderr and "tok/s" in proc.stderr


def test_sampling_is_seeded(air, model_dir):
    def run(seed):
        code, env = air.json("generate", "--model", model_dir, "--prompt", PROMPT,
                             "--max-new-tokens", 16, "--temperature", 1.5, "--top-p", 0.95,
                             "--seed", seed)
        assert code == 0, env
        return env["data"]["token_ids"]

    a, b, c = run(1), run(1), run(2)
    assert a == b
    assert a != c


def test_stops_at_eos(air, model_dir, tmp_path):
    # Make the greedy continuation's 3rd token the eos by declaring it eos in config.json.
    _, env = air.json("generate", "--model", model_dir, "--prompt", PROMPT, "--max-new-tokens", 8)
    tokens = env["data"]["token_ids"]
    stop = tokens[2]
    d = tmp_path / "eos_model"
    d.mkdir()
    for f in model_dir.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((d / "config.json").read_text())
    cfg["eos_token_id"] = stop
    (d / "config.json").write_text(json.dumps(cfg))
    code, env = air.json("generate", "--model", d, "--prompt", PROMPT, "--max-new-tokens", 8)
    assert code == 0, env
    assert env["data"]["stopped_at_eos"] is True
    assert env["data"]["token_ids"] == tokens[:tokens.index(stop) + 1]


@pytest.mark.parametrize("flags,needle", [
    (["--top-p", "0"], "--top-p: 0 is out of range"),
    (["--temperature", "-1"], "--temperature: -1 is out of range"),
    (["--max-new-tokens", "0"], "--max-new-tokens: 0 is out of range"),
    # 100000 threads used to abort (std::system_error when thread creation failed).
    (["--threads", "100000"], "--threads: Value 100000 not in range 0 to 1024"),
])
def test_bad_flags_name_the_flag(air, model_dir, flags, needle):
    proc = air("generate", "--model", model_dir, "--prompt", PROMPT, *flags)
    assert proc.returncode == 2
    assert needle in proc.stderr


def test_device_names_what_is_missing(air, model_dir):
    """--device picks the backend; a device that is not one, or a GPU this machine cannot use
    (CI has none), is an error naming the flag and the CPU path; --device cpu generates."""
    proc = air("generate", "--model", model_dir, "--prompt", PROMPT, "--device", "gpu")
    assert proc.returncode == 2, proc.stderr
    assert "--device: unknown device 'gpu': valid devices are cpu, cuda, cuda:N" in proc.stderr
    proc = air("generate", "--model", model_dir, "--prompt", PROMPT, "--device", "cuda")
    if proc.returncode == 0:  # a machine with a usable GPU
        return
    assert "--device cuda: " in proc.stderr and "device: cpu" in proc.stderr, proc.stderr
    proc = air("generate", "--model", model_dir, "--prompt", PROMPT, "--device", "cpu",
               "--max-new-tokens", 3)
    assert proc.returncode == 0, proc.stderr


def test_missing_model_names_where_it_looked(air, tmp_path):
    proc = air("generate", "--model", tmp_path / "nothing", "--prompt", "hi")
    assert proc.returncode != 0
    assert "nothing" in proc.stderr


def test_chat_renders_the_template_like_transformers(air, model_dir):
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    want = tok.apply_chat_template([{"role": "user", "content": "Name a color."}],
                                   add_generation_prompt=True, tokenize=True)
    if isinstance(want, dict) or hasattr(want, "input_ids"):
        want = want["input_ids"]
    code, env = air.json("generate", "--model", model_dir, "--prompt", "Name a color.",
                         "--chat", "--max-new-tokens", 4)
    assert code == 0, env
    assert env["data"]["prompt_tokens"] == len(want)


def test_chat_without_a_template_is_a_clear_error(air, tmp_path):
    d = tmp_path / "plain"
    make_tokenizer(d)  # no chat tokens, no chat_template
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=320, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=1, max_position_embeddings=64)
    transformers.LlamaForCausalLM(config).save_pretrained(d)
    proc = air("generate", "--model", d, "--prompt", "hi", "--chat")
    assert proc.returncode != 0
    assert "--chat" in proc.stderr


def test_dataset_mode_scores_exact_matches(air, model_dir, tmp_path):
    # What the model answers to the alpaca prompt of (instruction, input), asked directly ...
    prompt = "### Instruction:\nSay it.\n\n### Input:\nfox\n\n### Response:\n"
    _, env = air.json("generate", "--model", model_dir, "--prompt", prompt, "--max-new-tokens", 6)
    answer = env["data"]["text"]
    # ... is an exact match for a record expecting it, and not for one expecting something else.
    data = tmp_path / "eval.jsonl"
    data.write_text(json.dumps({"instruction": "Say it.", "input": "fox", "output": answer}) + "\n" +
                    json.dumps({"instruction": "Say it.", "input": "fox", "output": "xyz"}) + "\n")
    code, env = air.json("generate", "--model", model_dir, "--dataset", data,
                         "--max-new-tokens", 6)
    assert code == 0, env
    d = env["data"]
    assert d["total"] == 2 and d["exact_match"] == 1
    assert [r["exact_match"] for r in d["results"]] == [True, False]
    assert d["results"][0]["source"].endswith("eval.jsonl:1")
    proc = air("generate", "--model", model_dir, "--dataset", data, "--max-new-tokens", 6)
    assert "exact match: 1/2 (50.0%)" in proc.stdout


def test_prompt_or_dataset_exactly_one(air, model_dir, tmp_path):
    proc = air("generate", "--model", model_dir)
    assert proc.returncode == 2
    assert "exactly one of --prompt TEXT or --dataset FILE" in proc.stderr
    proc = air("generate", "--model", model_dir, "--prompt", "", "--max-new-tokens", 2)
    assert proc.returncode == 2
    assert "--prompt: the prompt is empty" in proc.stderr
    data = tmp_path / "eval.jsonl"
    data.write_text(json.dumps({"instruction": "Say it.", "output": "fox"}) + "\n")
    proc = air("generate", "--model", model_dir, "--dataset", data, "--chat")
    assert proc.returncode == 2
    assert "--chat goes with --prompt" in proc.stderr


def test_a_prompt_longer_than_the_model_allows(air, model_dir, tmp_path):
    long_text = "fox " * 200  # well over the model's max_position_embeddings of 128 tokens
    proc = air("generate", "--model", model_dir, "--prompt", long_text, "--max-new-tokens", 1)
    assert proc.returncode == 2
    assert "max_position_embeddings is 128: it must be shorter" in proc.stderr
    # Room for fewer new tokens than asked: says how many fit.
    proc = air("generate", "--model", model_dir, "--prompt", PROMPT, "--max-new-tokens", 500)
    assert proc.returncode == 2
    assert "ask for at most" in proc.stderr
    # In dataset mode the record is named.
    data = tmp_path / "eval.jsonl"
    data.write_text(json.dumps({"instruction": "Say it.", "output": "fox"}) + "\n" +
                    json.dumps({"instruction": long_text, "output": "fox"}) + "\n")
    proc = air("generate", "--model", model_dir, "--dataset", data, "--max-new-tokens", 2)
    assert proc.returncode == 2
    assert f"{data}:2: the prompt is" in proc.stderr
