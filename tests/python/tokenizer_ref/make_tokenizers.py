#!/usr/bin/env python3
"""Builds reference byte-level BPE tokenizers with the real Hugging Face `tokenizers` library.

Three model directories (tokenizer.json + tokenizer_config.json), trained on the given corpus:
  llama3/  Llama 3 style: Split(Llama 3 regex, Isolated) + ByteLevel(use_regex=false),
           ignore_merges, <|begin_of_text|> ... <|eot_id|> specials, TemplateProcessing that
           puts <|begin_of_text|> first, the Llama 3 chat template; merges as [a, b] lists.
  qwen2/   Qwen2 style: NFC normalizer, Split(Qwen2 regex) + ByteLevel, ByteLevel
           post-processor, <|endoftext|> <|im_start|> <|im_end|> specials, non-special added
           tokens <think> </think> and a normalized one ("Dvořák", also matched in NFD), the ChatML chat template
           (Qwen2's, with its default system prompt); merges written as "a b" strings.
  gpt2/    GPT-2 style: ByteLevel(add_prefix_space=true, use_regex=true) alone, plus added
           tokens exercising lstrip / rstrip / single_word.

    python make_tokenizers.py CORPUS.jsonl OUT_DIR [--train-lines N]
"""
import argparse
import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# The chat templates of the two families, as their tokenizer_config.json files carry them.
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
QWEN2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                   "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|reserved_special_token_2|>", "<|eot_id|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def read_corpus(path: str, limit: int) -> list:
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f]
    return texts[:limit]


def train(pre_tokenizer, texts, vocab_size, normalizer=None) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def save(tok: Tokenizer, out_dir: str, config: dict, edit=None) -> None:
    """Writes tokenizer.json (after `edit` of its JSON) and tokenizer_config.json."""
    os.makedirs(out_dir, exist_ok=True)
    data = json.loads(tok.to_str())
    if edit is not None:
        edit(data)
    path = os.path.join(out_dir, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
    Tokenizer.from_file(path)  # the library must accept exactly this file
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


def build_llama3(texts, out_dir):
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok = train(pre, texts, 4000)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA3_SPECIALS])
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                      special_tokens=[(bos, tok.token_to_id(bos))])])

    def edit(data):
        data["model"]["ignore_merges"] = True
        data["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m
                                   for m in data["model"]["merges"]]

    save(tok, out_dir, {
        "bos_token": bos, "eos_token": "<|eot_id|>", "pad_token": None,
        "chat_template": LLAMA3_CHAT_TEMPLATE, "model_max_length": 8192,
        "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
    }, edit)


def build_qwen2(texts, out_dir):
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok = train(pre, texts, 3000, normalizer=normalizers.NFC())
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN2_SPECIALS])
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken("</think>", special=False, normalized=False),
                    AddedToken("Dvořák", special=False, normalized=True)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)

    def edit(data):
        data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m
                                   for m in data["model"]["merges"]]

    save(tok, out_dir, {
        "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": {"content": "<|endoftext|>", "__type": "AddedToken"},
        "chat_template": QWEN2_CHAT_TEMPLATE, "model_max_length": 32768,
        "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
    }, edit)


def build_gpt2(texts, out_dir):
    pre = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok = train(pre, texts, 2000)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    tok.add_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, single_word=True,
                               normalized=False),
                    AddedToken("[sep]", lstrip=True, normalized=True)])
    save(tok, out_dir, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                        "tokenizer_class": "PreTrainedTokenizerFast"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("out_dir")
    parser.add_argument("--train-lines", type=int, default=3000)
    args = parser.parse_args()
    texts = read_corpus(args.corpus, args.train_lines)
    build_llama3(texts, os.path.join(args.out_dir, "llama3"))
    build_qwen2(texts, os.path.join(args.out_dir, "qwen2"))
    build_gpt2(texts, os.path.join(args.out_dir, "gpt2"))


if __name__ == "__main__":
    main()
