#!/usr/bin/env python3
"""Tokenizer throughput: air's C++ byte-level BPE vs Hugging Face `tokenizers` (Rust).

Builds a mixed corpus (English, code, CJK, emoji, white-space runs: the parity tests' generator,
tests/python/tokenizer_ref/make_corpus.py) and trains Llama-3- and Qwen2-style tokenizer.json
files on part of it with the real `tokenizers` library (make_tokenizers.py). Then it encodes the
whole corpus with
  air          `air tokenize --input corpus.jsonl --summary` (one thread; encoding timed
               inside, after reading the file)
  hf           Tokenizer.encode over the texts, one at a time (one thread)
  hf batch     Tokenizer.encode_batch over all texts (Rust threads: every core)
checks that air and hf produce the same number of tokens (the parity tests check the ids
themselves), and prints tokens/s and the ratios.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/tokenize/bench.py [--lines 30000]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/python/tokenizer_ref"))

import make_corpus  # noqa: E402
import make_tokenizers  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    from tokenizers import Tokenizer

    texts = make_corpus.make(args.lines, args.seed)
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print(f"corpus: {len(texts)} texts, {megabytes:.1f} MB of UTF-8")
    print(f"{'tokenizer':10} {'tokens':>9} {'air tok/s':>11} {'hf tok/s':>11} "
          f"{'hf batch':>11} {'air/hf':>7} {'air/batch':>9}")
    with tempfile.TemporaryDirectory(prefix="air_bench_tok_") as tmp:
        work = pathlib.Path(tmp)
        corpus = work / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts),
                          encoding="utf-8")
        for kind, build in (("llama3", make_tokenizers.build_llama3),
                            ("qwen2", make_tokenizers.build_qwen2)):
            out = work / kind
            build(texts[:3000], str(out))
            proc = subprocess.run([air, "tokenize", "--tokenizer", str(out), "--input",
                                   str(corpus), "--summary", "--no-special-tokens"],
                                  capture_output=True, text=True, check=True)
            summary = json.loads(proc.stdout)
            hf = Tokenizer.from_file(str(out / "tokenizer.json"))
            start = time.perf_counter()
            hf_tokens = sum(len(hf.encode(t, add_special_tokens=False).ids) for t in texts)
            hf_seconds = time.perf_counter() - start
            start = time.perf_counter()
            batch = hf.encode_batch(texts, add_special_tokens=False)
            batch_seconds = time.perf_counter() - start
            if summary["tokens"] != hf_tokens or hf_tokens != sum(len(e.ids) for e in batch):
                sys.exit(f"{kind}: token counts differ: air {summary['tokens']}, hf {hf_tokens}")
            air_tps = summary["tokens"] / summary["encode_seconds"]
            hf_tps, batch_tps = hf_tokens / hf_seconds, hf_tokens / batch_seconds
            print(f"{kind:10} {hf_tokens:9} {air_tps:11,.0f} {hf_tps:11,.0f} {batch_tps:11,.0f} "
                  f"{air_tps / hf_tps:6.2f}x {air_tps / batch_tps:8.2f}x")


if __name__ == "__main__":
    main()
