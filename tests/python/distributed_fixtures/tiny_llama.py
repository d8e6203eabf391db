"""Builds the second seed cell's stand-ins for the tests: a tiny random Llama (transformers,
saved in Hugging Face format with the repository's tiny BPE tokenizer and a chat template) and
a local chat dataset in the layout of HuggingFaceH4/Multilingual-Thinking (a `messages` column).
Pure functions of their output directory; nothing is downloaded."""
import json
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[3]
TOKENIZER = REPO / "examples" / "data" / "tiny_instruct" / "tokenizer" / "tokenizer.json"

# A Llama-3-style template: the one tokenizer.apply_chat_template renders for SFTTrainer.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


def build_tiny_llama(out: pathlib.Path) -> pathlib.Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER),
                                        bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_chat_dataset(out: pathlib.Path, rows: int = 8) -> pathlib.Path:
    """`rows` conversations (system, user, assistant) in OUT/train.jsonl."""
    out.mkdir(parents=True, exist_ok=True)
    words = ["poco", "nefko", "nagic", "vediml", "fomeru", "fucgu", "lirat", "sobek"]
    with open(out / "train.jsonl", "w", encoding="utf-8") as f:
        for i in range(rows):
            w = words[i % len(words)]
            f.write(json.dumps({"messages": [
                {"role": "system", "content": "reasoning language: English"},
                {"role": "user", "content": f"Write the word {w} in capital letters."},
                {"role": "assistant", "content": w.upper()},
            ]}) + "\n")
    return out
