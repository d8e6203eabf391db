"""The gpt-oss tokenizer and chat templates, built offline from PyPI packages, as references.

The o200k_base BPE ranks come from the quicktok-v1 package (which ships them in its own binary
layout) and are written out in tiktoken's format; tiktoken itself then accepts them only if
they hash to the SHA-256 it pins for o200k_base (the file it would otherwise download), so the
result is provably the real encoding. From it:
  - harmony_encoding(): tiktoken's o200k_harmony (o200k_base + the harmony special tokens
    <|start|> 200006, <|end|> 200007, <|message|> 200008, <|channel|> 200005, <|return|> 200002,
    <|call|> 200012, ...);
  - make_tokenizer_dir(): a Hugging Face tokenizer.json converted by transformers'
    TikTokenConverter (how gpt-oss's tokenizer.json was made) with those special tokens, and a
    tokenizer_config.json carrying a chat template;
  - encodings_dir(): a directory openai-harmony loads o200k_base from (TIKTOKEN_ENCODINGS_BASE).
The chat templates are TRL's copies (trl/chat_templates/): gptoss.jinja, the model's template
(TRL recognizes a tokenizer's template by byte equality with it), and gptoss_training.jinja,
the one TRL's SFTTrainer swaps in for assistant_only_loss.
A missing package or a hash mismatch raises: tests that need these fail, never skip.
"""
import base64
import hashlib
import json
import os
import pathlib
import struct

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def _quicktok_ranks() -> list:
    """(rank, token bytes) of quicktok's o200k.vocab: u32 count, then u16 length, bytes, u32
    rank per token (little-endian)."""
    import quicktok  # noqa: F401  (quicktok-v1)
    path = pathlib.Path(quicktok.__file__).parent / "data" / "o200k.vocab"
    data = path.read_bytes()
    (count,), off, ranks = struct.unpack_from("<I", data, 0), 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, off)
        token = data[off + 2:off + 2 + length]
        (rank,) = struct.unpack_from("<I", data, off + 2 + length)
        off += 2 + length + 4
        ranks.append((rank, token))
    assert off == len(data), "unexpected o200k.vocab layout"
    return sorted(ranks)


def o200k_base_bytes() -> bytes:
    return b"".join(base64.b64encode(token) + b" " + str(rank).encode() + b"\n"
                    for rank, token in _quicktok_ranks())


def prepare(cache_dir: pathlib.Path) -> pathlib.Path:
    """Writes o200k_base.tiktoken into `cache_dir` (as tiktoken's cache entry for its URL and
    by name) and points tiktoken at it. Returns the by-name path."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    data = o200k_base_bytes()
    (cache_dir / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(data)
    named = cache_dir / "o200k_base.tiktoken"
    named.write_bytes(data)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(cache_dir)  # openai-harmony
    return named


def harmony_encoding(cache_dir: pathlib.Path):
    """tiktoken's o200k_harmony; tiktoken verifies the ranks' SHA-256 (a mismatch makes it try
    the network, which fails here)."""
    import tiktoken
    prepare(cache_dir)
    return tiktoken.get_encoding("o200k_harmony")


def trl_template(name: str) -> str:
    import trl
    return (pathlib.Path(trl.__file__).parent / "chat_templates" / name).read_text(
        encoding="utf-8")


def make_tokenizer_dir(out: pathlib.Path, cache_dir: pathlib.Path, chat_template: str) -> None:
    """tokenizer.json (o200k_harmony as a Hugging Face tokenizer) and tokenizer_config.json."""
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import TikTokenConverter

    encoding = harmony_encoding(cache_dir)
    tokenizer = TikTokenConverter(vocab_file=str(cache_dir / "o200k_base.tiktoken"),
                                  pattern=encoding._pat_str).converted()
    base = tokenizer.get_vocab_size()
    by_id = {}
    for name, token_id in encoding._special_tokens.items():
        by_id[token_id] = name  # the later name wins where two share an id
    assert sorted(by_id) == list(range(base, base + len(by_id))), "special ids not contiguous"
    tokenizer.add_special_tokens([AddedToken(by_id[i], special=True, normalized=False)
                                  for i in sorted(by_id)])
    for name in ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>"]:
        assert tokenizer.token_to_id(name) == encoding._special_tokens[name], name
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|startoftext|>",
              "eos_token": "<|return|>", "pad_token": "<|endoftext|>",
              "model_max_length": 131072, "chat_template": chat_template}
    (out / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False),
                                               encoding="utf-8")
