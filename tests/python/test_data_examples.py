"""The shipped instruction dataset (examples/data/tiny_instruct): in sync with its generator,
held-out split disjoint from train, and readable by air's pipeline with the shipped tokenizer
(prompt masked, response and EOS learned)."""
import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"
sys.path.insert(0, str(DATA))
import make_tiny_instruct  # noqa: E402


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_committed_files_match_the_generator(tmp_path):
    subprocess.run([sys.executable, str(DATA / "make_tiny_instruct.py"), str(tmp_path)],
                   check=True, capture_output=True)
    for name in ["train.jsonl", "eval.jsonl"]:
        assert (tmp_path / name).read_bytes() == (DATA / "tiny_instruct" / name).read_bytes()


def test_held_out_split_is_disjoint_and_sized():
    train = read_jsonl(DATA / "tiny_instruct" / "train.jsonl")
    held_out = read_jsonl(DATA / "tiny_instruct" / "eval.jsonl")
    assert len(train) == make_tiny_instruct.TRAIN_SIZE and len(train) >= 300
    assert len(held_out) == make_tiny_instruct.EVAL_SIZE
    key = lambda r: (r["instruction"], r.get("input", ""))  # noqa: E731
    assert not {key(r) for r in train} & {key(r) for r in held_out}
    assert len({r["instruction"].split(" from")[0] for r in train}) == 9  # every task present


def test_pipeline_reads_it_with_the_shipped_tokenizer(air_bin):
    proc = subprocess.run([air_bin, "tokenize", "--tokenizer", DATA / "tiny_instruct" / "tokenizer",
                           "--dataset", DATA / "tiny_instruct", "--max-seq-len", "128"],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    examples = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert len(examples) == make_tiny_instruct.TRAIN_SIZE
    config = json.loads((DATA / "tiny_instruct" / "tokenizer" / "tokenizer_config.json")
                        .read_text())
    vocab = json.loads((DATA / "tiny_instruct" / "tokenizer" / "tokenizer.json").read_text())
    eos = next(t["id"] for t in vocab["added_tokens"] if t["content"] == config["eos_token"])
    for ex in examples:
        assert ex["labels"][0] == -100 and ex["labels"][-1] == eos == ex["input_ids"][-1]
    assert max(len(ex["input_ids"]) for ex in examples) <= 64  # short: fast to train on a CPU
