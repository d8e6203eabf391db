"""The data pipeline end to end (`air tokenize --chat / --dataset`) against transformers.

- Chat: air's built-in Llama 3 and ChatML (Qwen2) templates render exactly the text and ids of
  transformers' apply_chat_template with the real Jinja templates, and air's assistant mask
  equals the one transformers computes from the same templates marked with {% generation %}.
- Alpaca: input_ids and labels equal a Python re-implementation of the first seed's
  format_example (tokenizer(text, truncation=True, max_length=N)), with the prompt masked to
  -100 (tokens that end inside the prompt) instead of training on everything.
- Bad datasets give errors naming FILE:LINE and the field; hub ids resolve through the HF cache.
"""
import json
import random
import shutil
import subprocess

import pytest
from transformers import AutoTokenizer

from test_tokenizer_parity import ref_dir  # noqa: F401  (session fixture: reference tokenizers)

# The same templates with the assistant's part inside {% generation %}, so transformers can
# report which tokens are the assistant's (return_assistant_tokens_mask).
LLAMA3_GENERATION_TEMPLATE = (
    "{% for message in messages %}{% if loop.index0 == 0 %}{{ bos_token }}{% endif %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}"
    "{{ message['content'] | trim + '<|eot_id|>' }}{% endgeneration %}"
    "{% else %}{{ message['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
QWEN2_GENERATION_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

SNIPPETS = ["Hello!", "  padded with spaces  ", "Reverse: olleh", "def f(x):\n    return x * 2",
            "你好，世界！", "日本語のテキスト。", "안녕하세요", "😀👍🏽 emoji", "Line one\n\nLine two\n",
            "12345 + 67890 = 80235", "It's a test, isn't it?", "tab\tseparated\tvalues",
            "<|im_end|> literal marker", "Dvořák and café", ""]


def conversations(count: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        messages = []
        if rng.random() < 0.5:
            messages.append({"role": "system", "content": rng.choice(SNIPPETS) or "Be brief."})
        for _ in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": rng.choice(SNIPPETS) or "?"})
            messages.append({"role": "assistant", "content": rng.choice(SNIPPETS)})
        gen = rng.random() < 0.3
        if gen:
            messages.append({"role": "user", "content": rng.choice(SNIPPETS) or "next"})
        out.append({"messages": messages, "add_generation_prompt": gen})
    return out


def run_air(air_bin, *args, check=True):
    proc = subprocess.run([air_bin, "tokenize", *map(str, args)], capture_output=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr.decode()
    lines = [json.loads(x) for x in proc.stdout.decode("utf-8").split("\n") if x]
    return proc, lines


@pytest.mark.parametrize("kind,generation_template", [
    ("llama3", LLAMA3_GENERATION_TEMPLATE), ("qwen2", QWEN2_GENERATION_TEMPLATE)])
def test_chat_template_matches_transformers(air_bin, ref_dir, tmp_path, kind,  # noqa: F811
                                            generation_template):
    convs = conversations(300, 11)
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in convs),
                    encoding="utf-8")
    _, got = run_air(air_bin, "--tokenizer", ref_dir / kind, "--input", path, "--chat")
    hf = AutoTokenizer.from_pretrained(str(ref_dir / kind))
    marked_dir = tmp_path / "marked"
    shutil.copytree(ref_dir / kind, marked_dir)
    config = json.loads((marked_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = generation_template
    (marked_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    marked = AutoTokenizer.from_pretrained(str(marked_dir))
    assert len(got) == len(convs)
    masked_tokens = 0
    for conv, g in zip(convs, got):
        gen = conv["add_generation_prompt"]
        text = hf.apply_chat_template(conv["messages"], tokenize=False, add_generation_prompt=gen)
        assert g["text"] == text
        ids = hf.apply_chat_template(conv["messages"], tokenize=True, add_generation_prompt=gen,
                                     return_dict=True)["input_ids"]
        assert g["ids"] == ids
        assert marked.apply_chat_template(conv["messages"], tokenize=False,
                                          add_generation_prompt=gen) == text
        out = marked.apply_chat_template(conv["messages"], tokenize=True, return_dict=True,
                                         add_generation_prompt=gen,
                                         return_assistant_tokens_mask=True)
        assert g["assistant_mask"] == list(out["assistant_masks"]), conv
        masked_tokens += sum(g["assistant_mask"])
    assert masked_tokens > 1000  # the comparison covered plenty of assistant tokens


def seed_format_example(tok, row, max_seq_len):
    """The first seed's format_example, with labels masked on the prompt (what air does)."""
    instruction, context, response = row["instruction"], row.get("input", ""), row["output"]
    prompt = f"### Instruction:\n{instruction}\n\n"
    if context:
        prompt += f"### Input:\n{context}\n\n"
    prompt += "### Response:\n"
    text = f"{prompt}{response}{tok.eos_token}"
    enc = tok(text, truncation=True, max_length=max_seq_len, return_offsets_mapping=True)
    ids = enc["input_ids"]
    labels = [i if end > len(prompt) else -100 for i, (_, end) in zip(ids, enc["offset_mapping"])]
    return ids, labels


@pytest.mark.parametrize("kind", ["llama3", "qwen2"])
@pytest.mark.parametrize("max_seq_len", [512, 40])
def test_alpaca_examples_match_seed_format(air_bin, ref_dir, tmp_path, kind,  # noqa: F811
                                           max_seq_len):
    rng = random.Random(5)
    rows = []
    for i in range(200):
        row = {"instruction": rng.choice(SNIPPETS) or "Say nothing.",
               "output": " ".join(rng.choice(SNIPPETS) for _ in range(rng.randint(1, 4)))}
        if rng.random() < 0.5:
            row["input"] = rng.choice(SNIPPETS)
        rows.append(row)
    path = tmp_path / "alpaca.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    _, got = run_air(air_bin, "--tokenizer", ref_dir / kind, "--dataset", path,
                     "--max-seq-len", max_seq_len)
    hf = AutoTokenizer.from_pretrained(str(ref_dir / kind))
    expected = []
    for row in rows:
        ids, labels = seed_format_example(hf, row, max_seq_len)
        if any(x != -100 for x in labels[1:]):  # air drops examples with nothing to learn
            expected.append({"input_ids": ids, "labels": labels})
    assert got == expected
    assert len(got) > 50
    if max_seq_len == 40:
        assert len(expected) < len(rows)  # truncation did cut some responses off entirely
    if kind == "llama3":
        assert all(e["input_ids"][0] == hf.bos_token_id for e in got)


def test_dataset_errors_name_file_line_and_field(air, ref_dir, tmp_path):  # noqa: F811
    tok = ref_dir / "llama3"
    cases = [
        ('{"instruction": "a", "output": "b"}\n{"instruction": "a", "output": \n', ":2:",
         "invalid JSON"),
        ('{"instruction": "a", "output": "b"}\n\n{"instruction": "x"}\n', ":3:",
         'field "output" is missing'),
        ('{"instruction": "a", "output": 7}\n', ":1:", 'field "output" must be a string'),
        ('[{"messages": [{"role": "user", "content": "hi"}]}]', ":1:", 'role "assistant"'),
        ('[\n {"instruction": "a", "output": "b"},\n {"messages": [{"role": "user"}]}\n]', ":3:",
         'messages[0] has no field "content"'),
        ('{"text": "plain"}\n', ":1:", 'neither alpaca'),
        ('', "", "empty dataset"),
        ('\n\n', "", "empty dataset"),
    ]
    for i, (content, where, needle) in enumerate(cases):
        path = tmp_path / f"bad{i}.jsonl"
        path.write_text(content)
        proc = air("tokenize", "--tokenizer", tok, "--dataset", path)
        assert proc.returncode == 2, (content, proc.stderr)
        assert f"{path}{where}" in proc.stderr and needle in proc.stderr, (content, proc.stderr)


def test_dataset_names_resolve_like_the_hub_cache(air, ref_dir, tmp_path):  # noqa: F811
    tok = ref_dir / "llama3"
    rows = '{"instruction": "Reverse: abc", "output": "cba"}\n'
    snapshot = tmp_path / "hub" / "datasets--acme--tiny" / "snapshots" / "0123abc"
    (snapshot / "data").mkdir(parents=True)
    (snapshot / "data" / "train-00000-of-00002.jsonl").write_text(rows)
    (snapshot / "data" / "train-00001-of-00002.jsonl").write_text(rows * 2)
    (tmp_path / "hub" / "datasets--acme--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "datasets--acme--tiny" / "refs" / "main").write_text("0123abc")
    env = {"HF_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = air("tokenize", "--tokenizer", tok, "--dataset", "acme/tiny", env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3
    local = tmp_path / "local"
    local.mkdir()
    (local / "train.json").write_text(json.dumps([json.loads(rows)] * 4))
    proc = air("tokenize", "--tokenizer", tok, "--dataset", local, env=env)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 4, proc.stderr
    proc = air("tokenize", "--tokenizer", tok, "--dataset", "acme/missing", env=env)
    assert proc.returncode == 1
    assert "acme/missing" in proc.stderr and "datasets--acme--missing" in proc.stderr
