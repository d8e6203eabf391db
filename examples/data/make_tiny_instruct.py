#!/usr/bin/env python3
"""Writes tiny_instruct/: a small alpaca-format instruction dataset a tiny model can learn from
scratch in minutes on a CPU, and (optionally) a small Llama 3 style tokenizer trained on it.

Every task is a deterministic transformation of a short input — reverse a word, write it in
capitals, sort its letters, repeat it, count its letters, give its first letter, add two small
numbers, sort three words, count from 1 to n — so a model can visibly get better at it and a
held-out split can be checked exactly. Held-out pairs (task, input) never occur in train.jsonl.

    python make_tiny_instruct.py [OUT_DIR]             # train.jsonl, eval.jsonl (stdlib only)
    python make_tiny_instruct.py OUT_DIR --tokenizer   # also tokenizer/ (needs `tokenizers`)

The same seed always writes the same files (random.Random is deterministic across platforms
for the calls used here).
"""
import argparse
import json
import os
import random

SEED = 2024
TRAIN_SIZE = 480
EVAL_SIZE = 64

WORDS = ("cat dog sun map pen cup box hat red sky tree fish bird moon star rain lamp milk "
         "book door king frog leaf ship wind gold salt rock bell coin duck jam kite nest "
         "owl pig rose sand tent vase wolf yak zoo apple bread chair grape house lemon "
         "mouse river stone tiger").split()


def reverse(rng):
    w = rng.choice(WORDS)
    return "Reverse the letters of the word.", w, w[::-1]


def capitals(rng):
    w = rng.choice(WORDS)
    return "Write the word in capital letters.", w, w.upper()


def sort_letters(rng):
    w = rng.choice(WORDS)
    return "Sort the letters of the word alphabetically.", w, "".join(sorted(w))


def repeat(rng):
    w = rng.choice(WORDS)
    return "Repeat the word three times.", w, " ".join([w] * 3)


def count_letters(rng):
    w = rng.choice(WORDS)
    return "How many letters are in the word?", w, str(len(w))


def first_letter(rng):
    w = rng.choice(WORDS)
    return "What is the first letter of the word?", w, w[0]


def add(rng):
    a, b = rng.randint(0, 20), rng.randint(0, 20)
    return "Add the two numbers.", f"{a} + {b}", str(a + b)


def sort_words(rng):
    words = rng.sample(WORDS, 3)
    return "Sort the words alphabetically.", " ".join(words), " ".join(sorted(words))


def count_to(rng):
    n = rng.randint(2, 9)
    return f"Count from 1 to {n}.", "", " ".join(str(i) for i in range(1, n + 1))


TASKS = [reverse, capitals, sort_letters, repeat, count_letters, first_letter, add, sort_words,
         count_to]


def make_records(seed: int = SEED):
    """Unique (instruction, input) records: the first EVAL_SIZE are held out."""
    rng = random.Random(seed)
    seen = set()
    records = []
    while len(records) < TRAIN_SIZE + EVAL_SIZE:
        instruction, inp, output = rng.choice(TASKS)(rng)
        if (instruction, inp) in seen:
            continue
        seen.add((instruction, inp))
        record = {"instruction": instruction, "input": inp, "output": output}
        if not inp:
            del record["input"]
        records.append(record)
    return records[EVAL_SIZE:], records[:EVAL_SIZE]


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def build_tokenizer(records, out_dir):
    """A 512-token Llama 3 style byte-level BPE with <|begin_of_text|> and <|eot_id|>."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers import processors, trainers
    pattern = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    texts = []
    for r in records:
        prompt = f"### Instruction:\n{r['instruction']}\n\n"
        if r.get("input"):
            prompt += f"### Input:\n{r['input']}\n\n"
        texts.append(f"{prompt}### Response:\n{r['output']}")
    trainer = trainers.BpeTrainer(vocab_size=512, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(sorted(texts), trainer)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
        special_tokens=[(bos, tok.token_to_id(bos))])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    config = {"bos_token": bos, "eos_token": "<|eot_id|>", "pad_token": None,
              "model_max_length": 256, "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?",
                        default=os.path.join(os.path.dirname(__file__), "tiny_instruct"))
    parser.add_argument("--tokenizer", action="store_true",
                        help="also train tokenizer/ (needs the tokenizers package)")
    args = parser.parse_args()
    train, held_out = make_records()
    os.makedirs(args.out_dir, exist_ok=True)
    write_jsonl(os.path.join(args.out_dir, "train.jsonl"), train)
    write_jsonl(os.path.join(args.out_dir, "eval.jsonl"), held_out)
    if args.tokenizer:
        build_tokenizer(train, os.path.join(args.out_dir, "tokenizer"))
    print(f"wrote {len(train)} train and {len(held_out)} held-out records to {args.out_dir}")


if __name__ == "__main__":
    main()
