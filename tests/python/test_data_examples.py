"""The shipped instruction dataset (examples/data/tiny_instruct): in sync with its generator (data
and tokenizer), held-out inputs never seen in training, every task present, and read by air's
pipeline exactly as Hugging Face `tokenizers` reads it — with every letter and digit of the data
its own token (what lets a tiny model learn to reverse or count letters of unseen words)."""
import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"
SHIPPED = DATA / "tiny_instruct"
sys.path.insert(0, str(DATA))
import make_tiny_instruct  # noqa: E402


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_committed_files_match_the_generator(tmp_path):
    # The tokenizer is generated too: `tokenizers` is part of the test venv (missing: a failure).
    subprocess.run([sys.executable, str(DATA / "make_tiny_instruct.py"), str(tmp_path),
                    "--tokenizer"], check=True, capture_output=True)
    names = ["train.jsonl", "eval.jsonl", "tokenizer/tokenizer.json",
             "tokenizer/tokenizer_config.json"]
    for name in names:
        assert (tmp_path / name).read_bytes() == (SHIPPED / name).read_bytes(), name


def test_held_out_inputs_never_occur_in_training():
    train = read_jsonl(SHIPPED / "train.jsonl")
    held_out = read_jsonl(SHIPPED / "eval.jsonl")
    tasks = len(make_tiny_instruct.TASKS)
    assert len(train) == tasks * make_tiny_instruct.TRAIN_PER_TASK >= 3000
    assert len(held_out) == tasks * make_tiny_instruct.EVAL_PER_TASK
    assert {r["instruction"] for r in train} == {r["instruction"] for r in held_out}
    assert len({r["instruction"] for r in train}) == tasks  # every task in both splits
    # Not just new (task, input) pairs: no held-out word or number appears in any training input.
    train_pieces = {piece for r in train for piece in r["input"].split()}
    for r in held_out:
        assert not set(r["input"].split()) & train_pieces, r
    for r in train + held_out:  # the answers follow the rules
        instruction, _, answer = next(t for t in make_tiny_instruct.TASKS if t[0] == r["instruction"])
        assert r["output"] == answer(r["input"])


def test_pipeline_reads_it_like_hugging_face_tokenizers(air_bin):
    """`air tokenize --dataset` gives the ids `tokenizers` gives for the same text, masks the
    prompt, learns the answer and the end-of-turn token; the data is one token per character."""
    import tokenizers  # a missing reference fails, never skips
    proc = subprocess.run([air_bin, "tokenize", "--tokenizer", SHIPPED / "tokenizer",
                           "--dataset", SHIPPED, "--max-seq-len", "128"],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    examples = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    records = read_jsonl(SHIPPED / "train.jsonl")
    assert len(examples) == len(records)
    tok = tokenizers.Tokenizer.from_file(str(SHIPPED / "tokenizer" / "tokenizer.json"))
    eos = tok.token_to_id(make_tiny_instruct.EOT)
    for ex, r in zip(examples, records):
        prompt = f"### Instruction:\n{r['instruction']}\n\n### Input:\n{r['input']}\n\n### Response:\n"
        assert ex["input_ids"] == tok.encode(prompt + r["output"] + make_tiny_instruct.EOT).ids
        answer = [t for t, label in zip(ex["input_ids"], ex["labels"]) if label != -100]
        assert answer[-1] == eos and ex["input_ids"][-1] == eos
        assert tok.decode(answer[:-1]) == r["output"]
        # One token per character of the answer ("Ġ" + letter would be two pieces of one).
        assert len(answer) - 1 == len(r["output"])
    assert max(len(ex["input_ids"]) for ex in examples) <= 64  # short: fast to train on a CPU
