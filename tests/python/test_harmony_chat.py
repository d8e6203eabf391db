"""GPT-OSS chat data in air against the references: the model's chat template run by
transformers, TRL's SFTTrainer, tiktoken's o200k_harmony encoding and openai-harmony.

Records follow HuggingFaceH4/Multilingual-Thinking (the second seed's data): the columns
reasoning_language, developer, user, analysis, final and messages, whose system message holds
"reasoning language: X" plus the instructions and whose assistant message carries its reasoning
in "thinking" (null on the other messages), plus variants (developer role, no system message,
several turns, a tool call, awkward text). The tokenizer is gpt-oss's o200k_harmony, built offline
and verified by tiktoken's pinned hash (engine_ref/gpt_oss_tokenizer.py); the template is
gptoss.jinja as TRL ships it (TRL recognizes the model's template by byte equality with it).

For every record:
  - air renders the text transformers' apply_chat_template renders, and the same token ids,
    which are also tiktoken's o200k_harmony encoding of that text;
  - air's assistant tokens are transformers' assistant_masks from TRL's gptoss_training.jinja
    (the template SFTTrainer swaps in for assistant_only_loss), both when air renders the
    model's template (harmony spans) and when it renders the training template ({% generation %});
  - air's training labels (`air tokenize --dataset`) are SFTTrainer's: every token with the
    seed's SFTConfig (assistant_only_loss=False, `--train-on-prompt` in air), the assistant's
    analysis and final messages with assistant_only_loss=True;
  - where the conversation has no system/developer message, openai-harmony's
    render_conversation_for_training (analysis kept) gives the same tokens. (With one, the model's
    template writes "# Instructions\\n\\n{text}\\n\\n<|end|>" where openai-harmony writes
    "...{text}<|end|>": air follows the template, which is what TRL trains on.)
A record without an assistant message is an error naming its file and line.
"""
import datetime
import json
import subprocess

import pytest
from transformers import AutoTokenizer

from engine_ref import gpt_oss_tokenizer

SYSTEM = {"role": "system", "thinking": None}
USER = {"role": "user", "thinking": None}


def thinking_record(language, developer, user, analysis, final):
    """A record shaped like Multilingual-Thinking's."""
    return {"reasoning_language": language, "developer": developer, "user": user,
            "analysis": analysis, "final": final,
            "messages": [dict(SYSTEM, content=f"reasoning language: {language}\n\n{developer}"),
                         dict(USER, content=user),
                         {"role": "assistant", "content": final, "thinking": analysis}]}


RECORDS = [
    thinking_record("French", "You are an AI chatbot with a lively and energetic personality.",
                    "Can you show me the latest trends on Twitter right now?",
                    "D'accord, l'utilisateur demande les tendances Twitter. Je ne peux pas "
                    "naviguer sur Internet...",
                    "Hey there! While I can't check Twitter (X) in real-time, here are some "
                    "**tips**:\n\n1. Open the *Explore* tab.\n2. Look at \"Trending\"."),
    thinking_record("German", "Du bist ein hilfreicher Assistent.",
                    "日本の首都はどこですか？ 😀", "Der Benutzer fragt auf Japanisch nach der "
                    "Hauptstadt. Es ist Tokio.", "日本の首都は**東京**です。"),
    {"messages": [{"role": "developer", "content": "Answer in one word."},
                  {"role": "user", "content": "Capital of Italy?"},
                  {"role": "assistant", "content": "Rome", "thinking": "Italy -> Rome."}]},
    {"messages": [{"role": "user", "content": "  spaces around  \n"},
                  {"role": "assistant", "content": "\n trimmed? no \n",
                   "thinking": "Keep the whitespace exactly.\n"}]},
    {"messages": [dict(SYSTEM, content="reasoning language: Spanish\n\nBe brief."),
                  dict(USER, content="2+2?"),
                  {"role": "assistant", "content": "4", "thinking": "Dos más dos."},
                  dict(USER, content="And 3*3? <tags> & \"quotes\""),
                  {"role": "assistant", "content": "9", "thinking": "Tres por tres."}]},
    {"messages": [dict(USER, content="Weather in Paris?"),
                  {"role": "assistant", "content": "", "thinking": "I should call the tool.",
                   "tool_calls": [{"type": "function", "function": {
                       "name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21}"},
                  {"role": "assistant", "content": "It is 21 °C.", "thinking": "Report it."}]},
]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    """Tokenizer directories with the model's template and with TRL's training template."""
    root = tmp_path_factory.mktemp("gpt_oss_tokenizer")
    cache = root / "tiktoken"
    official = root / "official"
    gpt_oss_tokenizer.make_tokenizer_dir(official, cache,
                                         gpt_oss_tokenizer.trl_template("gptoss.jinja"))
    training = root / "training"
    training.mkdir()
    (training / "tokenizer.json").symlink_to(official / "tokenizer.json")
    config = json.loads((official / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = gpt_oss_tokenizer.trl_template("gptoss_training.jinja")
    (training / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return {"official": official, "training": training, "cache": cache,
            "encoding": gpt_oss_tokenizer.harmony_encoding(cache)}


def air_chat(air_bin, tok_dir, tmp_path, records, render_only=False):
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps({"messages": r["messages"]}, ensure_ascii=False) + "\n"
                            for r in records), encoding="utf-8")
    args = [air_bin, "tokenize", "--tokenizer", str(tok_dir), "--input", str(path), "--chat"]
    proc = subprocess.run(args + (["--render-only"] if render_only else []), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_rendering_and_tokens_equal_the_chat_template(air_bin, tokenizers, tmp_path):
    hf = AutoTokenizer.from_pretrained(str(tokenizers["official"]))
    texts = air_chat(air_bin, tokenizers["official"], tmp_path, RECORDS, render_only=True)
    got = air_chat(air_bin, tokenizers["official"], tmp_path, RECORDS)
    for record, text, out in zip(RECORDS, texts, got, strict=True):
        want_text = hf.apply_chat_template(record["messages"], tokenize=False)
        assert text["text"] == want_text
        assert out["text"] == want_text
        want_ids = hf.apply_chat_template(record["messages"], tokenize=True,
                                          return_dict=True)["input_ids"]
        assert out["ids"] == want_ids
        assert out["ids"] == tokenizers["encoding"].encode(want_text, allowed_special="all")


@pytest.mark.parametrize("template", ["official", "training"])
def test_assistant_tokens_equal_trl_training_template_masks(air_bin, tokenizers, tmp_path,
                                                            template):
    hf = AutoTokenizer.from_pretrained(str(tokenizers["training"]))
    got = air_chat(air_bin, tokenizers[template], tmp_path, RECORDS)
    for record, out in zip(RECORDS, got, strict=True):
        want = hf.apply_chat_template(record["messages"], tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        assert out["ids"] == want["input_ids"]
        assert out["assistant_mask"] == want["assistant_masks"], record["messages"]
        assert 0 < sum(out["assistant_mask"]) < len(out["ids"])


def trl_labels(tok_dir, records, assistant_only_loss, tmp_path):
    """The labels TRL's SFTTrainer prepares for `records` (a tiny random GptOss model: the
    labels do not depend on it)."""
    from datasets import Dataset
    from transformers import GptOssConfig, GptOssForCausalLM
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    config = GptOssConfig(num_hidden_layers=1, num_local_experts=2, num_experts_per_tok=1,
                          hidden_size=32, intermediate_size=32, head_dim=8,
                          num_attention_heads=4, num_key_value_heads=2, vocab_size=len(tok),
                          layer_types=["full_attention"])
    # The seed's data settings (max_length 2048, batch 1); the rest does not touch the labels.
    args = SFTConfig(output_dir=str(tmp_path / "sft"), assistant_only_loss=assistant_only_loss,
                     max_length=2048, per_device_train_batch_size=1, report_to="none",
                     use_cpu=True, bf16=False)
    trainer = SFTTrainer(model=GptOssForCausalLM(config), args=args,
                         train_dataset=Dataset.from_list(records), processing_class=tok)
    return [(row["input_ids"], row["labels"]) for row in trainer.train_dataset]


@pytest.mark.parametrize("assistant_only_loss", [False, True])
def test_training_labels_equal_sft_trainer(air_bin, tokenizers, tmp_path, assistant_only_loss):
    records = [r for r in RECORDS if "reasoning_language" in r] + RECORDS[2:5]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    args = [air_bin, "tokenize", "--tokenizer", str(tokenizers["official"]), "--dataset",
            str(data), "--max-seq-len", "2048"]
    if not assistant_only_loss:
        args.append("--train-on-prompt")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    want = trl_labels(tokenizers["official"], records, assistant_only_loss, tmp_path)
    assert len(got) == len(want) == len(records)
    for g, (ids, labels) in zip(got, want, strict=True):
        assert g["input_ids"] == ids
        assert g["labels"] == labels
        learned = sum(1 for label in labels if label != -100)
        assert learned == len(ids) if not assistant_only_loss else 0 < learned < len(ids)


def test_tokens_equal_openai_harmony_without_developer_message(air_bin, tokenizers, tmp_path):
    from openai_harmony import (Conversation, HarmonyEncodingName, Message, ReasoningEffort,
                                RenderConversationConfig, Role, SystemContent,
                                load_harmony_encoding)

    encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)  # offline: the cache
    records = [r for r in RECORDS
               if r["messages"][0]["role"] == "user" and "tool_calls" not in str(r)]
    records.append({"messages": RECORDS[1]["messages"][1:]})
    assert len(records) >= 2
    got = air_chat(air_bin, tokenizers["official"], tmp_path, records)
    today = datetime.date.today().strftime("%Y-%m-%d")
    system = SystemContent.new().with_conversation_start_date(today).with_reasoning_effort(
        ReasoningEffort.MEDIUM)
    for record, out in zip(records, got, strict=True):
        messages = [Message.from_role_and_content(Role.SYSTEM, system)]
        for m in record["messages"]:
            if m["role"] == "user":
                messages.append(Message.from_role_and_content(Role.USER, m["content"]))
            else:
                messages.append(Message.from_role_and_content(Role.ASSISTANT, m["thinking"])
                                .with_channel("analysis"))
                messages.append(Message.from_role_and_content(Role.ASSISTANT, m["content"])
                                .with_channel("final"))
        want = encoding.render_conversation_for_training(
            Conversation.from_messages(messages), RenderConversationConfig(auto_drop_analysis=False))
        assert out["ids"] == want


def test_record_without_assistant_message_names_its_line(air_bin, tokenizers, tmp_path):
    data = tmp_path / "train.jsonl"
    bad = {"messages": [dict(SYSTEM, content="reasoning language: French\n\nHi."),
                        dict(USER, content="Bonjour")]}
    data.write_text(json.dumps(RECORDS[0]) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    proc = subprocess.run([air_bin, "tokenize", "--tokenizer", str(tokenizers["official"]),
                           "--dataset", str(data)], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert f"{data}:2" in proc.stderr and "assistant" in proc.stderr, proc.stderr
