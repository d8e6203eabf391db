#!/usr/bin/env python3
"""Writes tiny_instruct/: an alpaca-format instruction dataset that a tiny model can learn from
scratch in a few minutes on a CPU, and the tokenizer it is meant to be read with.

Every task is a deterministic rule over made-up words (or small numbers): reverse the letters,
write in capitals, sort the letters, repeat the word, count its letters, give its first or last
letter, spell it with spaces, sort two words, add one to a number. The held-out split uses words
(and numbers) that never occur in train.jsonl, so an exact answer there means the model
applies the rule rather than recalling an answer.

The tokenizer (Llama 3 style: the Llama 3 split regex, byte-level, <|begin_of_text|> and
<|eot_id|>) has one token per byte plus one whole-word token for each piece of the fixed prompt
text ("###", " Instruction", ":\\n", " Reverse", ...) and no merges, so the data itself —
letters and digits — is always read one character per token. With the usual merged word
pieces ("moon", " moon") a model cannot see the letters it is asked to reverse or count, and a
word's copies after a space are other tokens; here it can and they are not.

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
TRAIN_PER_TASK = 400
EVAL_PER_TASK = 8
CONSONANTS = "bcdfghjklmnprstvwz"
VOWELS = "aeiou"
BOS, EOT = "<|begin_of_text|>", "<|eot_id|>"
SPECIAL_TOKENS = [BOS, "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", EOT]
# Llama 3's pre-tokenizer split pattern.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def make_word(rng):
    """A pronounceable made-up word of 3 to 6 letters (consonant-vowel syllables)."""
    word = ""
    while len(word) < 3:
        for _ in range(rng.randint(1, 3)):
            word += rng.choice(CONSONANTS) + rng.choice(VOWELS)
            if rng.random() < 0.3:
                word += rng.choice(CONSONANTS)
    return word[:6]


# Each task: (instruction, make_input(rng, words) -> str, answer(input) -> str).
def one_word(rng, words):
    return rng.choice(words)


def two_words(rng, words):
    return " ".join(rng.sample(words, 2))


def number(rng, _words):
    return str(rng.randint(0, 999))


TASKS = [
    ("Reverse the letters of the word.", one_word, lambda w: w[::-1]),
    ("Write the word in capital letters.", one_word, lambda w: w.upper()),
    ("Sort the letters of the word alphabetically.", one_word, lambda w: "".join(sorted(w))),
    ("Repeat the word three times.", one_word, lambda w: " ".join([w] * 3)),
    ("How many letters are in the word?", one_word, lambda w: str(len(w))),
    ("What is the first letter of the word?", one_word, lambda w: w[0]),
    ("What is the last letter of the word?", one_word, lambda w: w[-1]),
    ("Spell the word with spaces between the letters.", one_word, lambda w: " ".join(w)),
    ("Sort the two words alphabetically.", two_words, lambda s: " ".join(sorted(s.split()))),
    ("Add one to the number.", number, lambda s: str(int(s) + 1)),
]


def make_records(seed: int = SEED):
    """(train, held_out): every task TRAIN_PER_TASK and EVAL_PER_TASK times, interleaved.

    The made-up words are split into a training and a held-out vocabulary, and the numbers
    into a training and a held-out set, so no held-out input occurs in training."""
    rng = random.Random(seed)
    # Not a word of the instructions: those have their own tokens (" times"), the data must not.
    instruction_words = {w.strip(".?").lower() for i, _, _ in TASKS for w in i.split()}
    vocabulary = sorted({make_word(rng) for _ in range(4000)} - instruction_words)
    rng.shuffle(vocabulary)
    held_out_words, train_words = vocabulary[:120], vocabulary[120:]
    numbers = [str(n) for n in range(1000)]
    rng.shuffle(numbers)
    held_out_numbers = set(numbers[:200])

    def records_for(words, count, held_out):
        out = []
        for instruction, make_input, answer in TASKS:
            seen = set()
            while len(seen) < count:
                inp = make_input(rng, words)
                if inp in seen or (inp.isdigit() and (inp in held_out_numbers) != held_out):
                    continue
                seen.add(inp)
                out.append({"instruction": instruction, "input": inp, "output": answer(inp)})
        rng.shuffle(out)
        return out

    held_out = records_for(held_out_words, EVAL_PER_TASK, held_out=True)
    train = records_for(train_words, TRAIN_PER_TASK, held_out=False)
    return train, held_out


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def byte_alphabet():
    """GPT-2's byte -> printable character table, in byte order (the ByteLevel alphabet)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def build_tokenizer(out_dir):
    """Byte tokens + whole-word tokens for the prompt text's pieces, no merges (see the top)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers import processors
    pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    # The prompt text around the data, as the trainer writes it (examples.cc's AlpacaPrompt),
    # with a placeholder letter "x" where the data goes (its pieces are dropped below).
    prompt_pieces = set()
    data_pieces = set()
    for instruction, _, _ in TASKS:
        text = f"### Instruction:\n{instruction}\n\n### Input:\nx\n\n### Response:\nx"
        prompt_pieces.update(piece for piece, _ in pre_tokenizer.pre_tokenize_str(text))
        data_pieces.update(piece for piece, _ in pre_tokenizer.pre_tokenize_str("x x"))
    alphabet = byte_alphabet()
    words = sorted(p for p in prompt_pieces - data_pieces if len(p) > 1 and p not in alphabet)
    vocab = {c: i for i, c in enumerate(alphabet)}
    for w in words:
        vocab[w] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.token_to_id(BOS))])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    config = {"bos_token": BOS, "eos_token": EOT, "pad_token": None, "model_max_length": 256,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return tok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?",
                        default=os.path.join(os.path.dirname(__file__), "tiny_instruct"))
    parser.add_argument("--tokenizer", action="store_true",
                        help="also write tokenizer/ (needs the tokenizers package)")
    args = parser.parse_args()
    train, held_out = make_records()
    os.makedirs(args.out_dir, exist_ok=True)
    write_jsonl(os.path.join(args.out_dir, "train.jsonl"), train)
    write_jsonl(os.path.join(args.out_dir, "eval.jsonl"), held_out)
    if args.tokenizer:
        build_tokenizer(os.path.join(args.out_dir, "tokenizer"))
    print(f"wrote {len(train)} train and {len(held_out)} held-out records to {args.out_dir}")


if __name__ == "__main__":
    main()
