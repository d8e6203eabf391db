"""Tokenizer parity: air's C++ byte-level BPE against Hugging Face `tokenizers`.

Three tokenizer.json files are trained here with the real library (tokenizer_ref/
make_tokenizers.py: Llama 3 style, Qwen2 style with NFC and added tokens, GPT-2 style with
add_prefix_space and lstrip/rstrip/single_word tokens) on part of a 6,000-line deterministic
corpus (tokenizer_ref/make_corpus.py: English, code, CJK, emoji with ZWJ and skin tones, white
space runs, long numbers, NFD text, special tokens inside text). Every line is encoded by both
(one `air tokenize` process per file) and must give identical ids; decoding must give the
library's text, which for Llama 3 style is the line itself.
"""
import json
import pathlib
import random
import subprocess
import sys
import time
import unicodedata

import pytest
from tokenizers import Tokenizer

sys.path.insert(0, str(pathlib.Path(__file__).parent / "tokenizer_ref"))
import make_corpus  # noqa: E402
import make_tokenizers  # noqa: E402

KINDS = ["llama3", "qwen2", "gpt2"]


@pytest.fixture(scope="session")
def ref_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tokref")
    corpus = out / "corpus.jsonl"
    texts = make_corpus.make(6000, 1234)
    corpus.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts),
                      encoding="utf-8")
    train = texts[:3000]
    make_tokenizers.build_llama3(train, str(out / "llama3"))
    make_tokenizers.build_qwen2(train, str(out / "qwen2"))
    make_tokenizers.build_gpt2(train, str(out / "gpt2"))
    return out


def corpus_texts(ref_dir):
    with open(ref_dir / "corpus.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def air_lines(air_bin, *args):
    proc = subprocess.run([air_bin, "tokenize", *map(str, args)], capture_output=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode("utf-8").split("\n") if line]


def test_corpus_is_large_and_mixed(ref_dir):
    texts = corpus_texts(ref_dir)
    assert len(texts) >= 5000
    joined = "".join(texts)
    for needle in ["'", "def ", "我们", "カタカナ", "안녕", "\u200d", "\U0001f3fd", "<|eot_id|>",
                   "<|im_start|>", "\t\t", "   ", "\n\n"]:
        assert needle in joined, needle
    assert any(unicodedata.normalize("NFC", t) != t for t in texts)  # NFD text present
    assert any(len(t) > 300 for t in texts)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("add_special", [True, False])
def test_encode_matches_hf_tokenizers(air_bin, ref_dir, kind, add_special):
    texts = corpus_texts(ref_dir)
    hf = Tokenizer.from_file(str(ref_dir / kind / "tokenizer.json"))
    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=add_special)]
    args = ["--tokenizer", ref_dir / kind, "--input", ref_dir / "corpus.jsonl"]
    if not add_special:
        args.append("--no-special-tokens")
    start = time.perf_counter()
    got = air_lines(air_bin, *args)
    elapsed = time.perf_counter() - start
    assert len(got) == len(texts)
    mismatches = [i for i, (g, e) in enumerate(zip(got, expected)) if g["ids"] != e]
    detail = ""
    if mismatches:
        i = mismatches[0]
        detail = (f"line {i + 1}: {texts[i]!r}\n air: {got[i]['ids']}\n hf:  {expected[i]}\n"
                  f" hf tokens: {hf.encode(texts[i], add_special_tokens=add_special).tokens}")
    assert not mismatches, f"{len(mismatches)} of {len(texts)} lines differ; first: {detail}"
    tokens = sum(len(e) for e in expected)
    print(f"\n{kind} add_special={add_special}: {len(texts)} lines, {tokens} tokens identical; "
          f"air tokenize {elapsed:.2f}s incl. load ({tokens / elapsed:,.0f} tok/s)")
    # --summary (the benchmark's mode) counts the same tokens.
    summary = air_lines(air_bin, *args, "--summary")
    assert len(summary) == 1 and summary[0]["lines"] == len(texts)
    assert summary[0]["tokens"] == tokens and summary[0]["encode_seconds"] > 0
    bad = subprocess.run([air_bin, "tokenize", "--tokenizer", str(ref_dir / kind), "--summary"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--summary" in bad.stderr and "--input" in bad.stderr
    # Decoding gives back what the library decodes.
    hf_decoded = hf.decode_batch(expected, skip_special_tokens=False)
    bad = [i for i, (g, d) in enumerate(zip(got, hf_decoded)) if g["text"] != d]
    assert not bad, f"decode differs on line {bad[0] + 1}: {got[bad[0]]['text']!r} vs " \
                    f"{hf_decoded[bad[0]]!r}"


@pytest.mark.parametrize("kind", KINDS)
def test_decode_of_encode_gives_the_text_back(air_bin, ref_dir, kind):
    texts = corpus_texts(ref_dir)
    got = air_lines(air_bin, "--tokenizer", ref_dir / kind, "--input", ref_dir / "corpus.jsonl",
                    "--no-special-tokens")
    for i, (text, g) in enumerate(zip(texts, got)):
        if kind == "qwen2":
            want = unicodedata.normalize("NFC", text)  # the normalizer composes NFD text
        elif kind == "gpt2":
            if any(t in text for t in ["<mask>", "[sep]", "<|endoftext|>"]):
                continue  # lstrip/rstrip absorb white space; each piece gets a prefix space
            want = text if text.startswith(" ") or not text else " " + text  # add_prefix_space
        else:
            want = text
        assert g["text"] == want, f"line {i + 1}: {text!r} -> {g['text']!r}"


@pytest.mark.parametrize("kind", KINDS)
def test_decode_of_arbitrary_ids_matches(air_bin, ref_dir, tmp_path, kind):
    """Random id sequences (bytes cut mid-character, special tokens, unknown ids) decode alike."""
    hf = Tokenizer.from_file(str(ref_dir / kind / "tokenizer.json"))
    size = hf.get_vocab_size(with_added_tokens=True)
    rng = random.Random(7)
    seqs = [[rng.randrange(size) for _ in range(rng.randint(0, 40))] for _ in range(2000)]
    seqs.append(list(range(size)))
    path = tmp_path / "ids.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in seqs))
    for skip in [False, True]:
        args = ["--tokenizer", ref_dir / kind, "--input", path, "--decode"]
        if skip:
            args.append("--skip-special-tokens")
        got = air_lines(air_bin, *args)
        want = hf.decode_batch(seqs, skip_special_tokens=skip)
        bad = [i for i, (g, w) in enumerate(zip(got, want)) if g["text"] != w]
        assert not bad, f"{seqs[bad[0]]}: {got[bad[0]]['text']!r} vs {want[bad[0]]!r}"


def test_every_byte_round_trips(air_bin, ref_dir, tmp_path):
    texts = [chr(b) for b in range(0x80)] + ["".join(chr(b) for b in range(0x80))]
    texts += ["\u00ff\u0100\U0010ffff\ufffd\ud7ff\ue000", "é" * 50]
    path = tmp_path / "bytes.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in texts))
    hf = Tokenizer.from_file(str(ref_dir / "llama3" / "tokenizer.json"))
    got = air_lines(air_bin, "--tokenizer", ref_dir / "llama3", "--input", path,
                    "--no-special-tokens")
    for text, g in zip(texts, got):
        assert g["ids"] == hf.encode(text, add_special_tokens=False).ids
        assert g["text"] == text


def test_bad_tokenizer_files_are_clear_errors(air, tmp_path, ref_dir):
    data = json.loads((ref_dir / "llama3" / "tokenizer.json").read_text(encoding="utf-8"))
    cases = {
        "model.type": ({**data, "model": {**data["model"], "type": "WordPiece"}},
                       "model.type: \"WordPiece\" is not supported"),
        "merge": ({**data, "model": {**data["model"], "merges": [["Ġzz", "qq"]]}},
                  "merges[0]"),
        "pre_tokenizer": ({**data, "pre_tokenizer": {"type": "Whitespace"}},
                          "pre-tokenizer type \"Whitespace\" is not supported"),
        "regex": ({**data, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated",
             "invert": False}, {"type": "ByteLevel", "use_regex": False}]}},
            "pretokenizers[0].pattern: invalid regex"),
        "normalizer": ({**data, "normalizer": {"type": "Lowercase"}},
                       "normalizer type \"Lowercase\" is not supported"),
    }
    for name, (content, needle) in cases.items():
        d = tmp_path / name
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps(content), encoding="utf-8")
        proc = air("tokenize", "--tokenizer", d, "hello")
        assert proc.returncode == 2, (name, proc.stderr)
        assert needle in proc.stderr and "tokenizer.json" in proc.stderr, (name, proc.stderr)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text('{"model": {"type": "BPE",\n "vocab": {,}}}')
    proc = air("tokenize", "--tokenizer", broken, "hello")
    assert proc.returncode == 2 and "tokenizer.json:2:" in proc.stderr, proc.stderr
    proc = air("tokenize", "--tokenizer", tmp_path / "nowhere", "hello")
    assert proc.returncode == 1 and "no tokenizer.json" in proc.stderr, proc.stderr
