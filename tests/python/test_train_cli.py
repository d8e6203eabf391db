"""`air train` as a user runs it: parameters from --config, HYPERPARAMETERS_PATH and --set, every
error with FILE:LINE:COL and a did-you-mean (exit code 2, -o json envelope), --dry-run plans,
progress lines (full lines on a pipe, carriage-return updates on a terminal), metrics.jsonl, and
a checkpoint that transformers loads with the tokenizer files copied from the base model.
"""
import json
import os
import pathlib
import pty
import random
import subprocess

import pytest
import yaml

import torch  # a missing reference fails, never skips
import transformers  # a missing reference fails, never skips
import tokenizers  # a missing reference fails, never skips
from safetensors.torch import load_file  # noqa: E402

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Instruction tuning teaches a model to follow requests.",
    "def add(a, b):\n    return a + b\n",
    "Paris is the capital of France. Rome is the capital of Italy.",
    "Gradient accumulation sums the gradients of several micro-batches.",
] * 4


LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")


def make_tokenizer(out: pathlib.Path, chat=False):
    """A small Llama-3-style byte-level BPE tokenizer built by the real `tokenizers` library
    (with chat: Llama 3's header and end-of-turn tokens and its chat template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    if chat:
        specials += ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
        special_tokens=[("<|begin_of_text|>", bos)])
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
              "tokenizer_class": "PreTrainedTokenizerFast"}
    if chat:
        config["chat_template"] = LLAMA3_CHAT_TEMPLATE
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return tok


def make_model(model_dir: pathlib.Path, with_tokenizer=True, vocab=320):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        bos_token_id=0, eos_token_id=1)
    transformers.LlamaForCausalLM(config).save_pretrained(model_dir, safe_serialization=True)
    if with_tokenizer:
        make_tokenizer(model_dir)


def write_pretokenized(path: pathlib.Path, n=10, vocab=320):
    rng = random.Random(1)
    with open(path, "w") as f:
        for _ in range(n):
            ids = [rng.randrange(2, vocab) for _ in range(rng.randint(4, 12))]
            f.write(json.dumps({"input_ids": ids, "labels": [-100] + ids[1:]}) + "\n")


def write_config(path: pathlib.Path, **params):
    path.write_text(yaml.safe_dump(params))
    return path


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


@pytest.fixture
def tiny(tmp_path):
    model_dir = tmp_path / "tiny"
    make_model(model_dir)
    data = tmp_path / "data.jsonl"
    write_pretokenized(data)
    return model_dir, data


def test_invalid_config_lists_every_error_with_location(air, tmp_path):
    cfg = tmp_path / "train.yaml"
    cfg.write_text("model_name: m\n"
                   "dataset_name: d.jsonl\n"
                   "output_dir: out\n"
                   "learning_rat: 0.1\n"
                   "per_device_batch_size: 0\n"
                   "max_seq_len: 128\n"
                   "max_length: 256\n"
                   "lr_scheduler_type: cosin\n")
    proc = air("train", "--config", cfg)
    assert proc.returncode == 2
    err = proc.stderr
    assert f"{cfg}:4:1: learning_rat: unknown parameter (did you mean 'learning_rate'?)" in err
    assert f"{cfg}:5:1: per_device_batch_size: 0 is out of range: must be >= 1" in err
    assert f"{cfg}:7:1: max_length: 'max_seq_len' and 'max_length' are the same parameter" in err
    assert f"{cfg}:8:1: lr_scheduler_type: unknown scheduler 'cosin' (did you mean 'cosine'?)" in err

    code, envelope = air.json("train", "--config", cfg)
    assert code == 2
    assert envelope["error"]["code"] == "invalid_argument"
    assert "learning_rat" in envelope["error"]["message"]


def test_no_parameters_is_a_clear_error(air, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HYPERPARAMETERS_PATH"}
    proc = air("train", env=env)
    assert proc.returncode == 2
    assert "give --config FILE, or set HYPERPARAMETERS_PATH" in proc.stderr
    proc = air("train", "--config", tmp_path / "missing.yaml")
    assert proc.returncode == 2
    assert "missing.yaml: no such file" in proc.stderr


def test_missing_model_and_dataset_name_the_parameter(air, tmp, tiny):
    model_dir, data = tiny
    cfg = write_config(tmp / "c.yaml", model_name=str(tmp / "nope"), dataset_name=str(data),
                       output_dir=str(tmp / "out"))
    proc = air("train", "--config", cfg, "--dry-run")
    assert proc.returncode != 0
    assert f"{cfg}:" in proc.stderr and "model_name:" in proc.stderr and "nope" in proc.stderr
    cfg = write_config(tmp / "d.yaml", model_name=str(model_dir),
                       dataset_name=str(tmp / "none.jsonl"), output_dir=str(tmp / "out"))
    proc = air("train", "--config", cfg, "--dry-run")
    assert proc.returncode != 0
    assert "dataset_name:" in proc.stderr and "none.jsonl" in proc.stderr


def test_hyperparameters_path_and_set_overrides_dry_run(air, tmp, tiny):
    model_dir, data = tiny
    params = write_config(tmp / "params.yaml", model_name=str(model_dir), dataset_name=str(data),
                          output_dir=str(tmp / "out"), per_device_batch_size=2,
                          gradient_accumulation_steps=2, num_train_epochs=3, warmup_ratio=0.1,
                          lr_scheduler_type="cosine", bf16=True)
    env = dict(os.environ, HYPERPARAMETERS_PATH=str(params))
    code, envelope = air.json("train", "--dry-run", env=env)
    assert code == 0, envelope
    data_out = envelope["data"]
    # 10 examples / batch 2 = 5 micro-batches per epoch; / accumulation 2 = 2 steps per epoch.
    assert data_out["total_steps"] == 6
    assert data_out["warmup_steps"] == 1  # ceil(0.1 * 6)
    assert data_out["dataset_kind"] == "pre-tokenized JSONL"
    # HF's bf16: true is FSDP's bf16 policy (as Accelerate sets it): params, reductions, buffers.
    assert data_out["precision"] == {"param_dtype": "bfloat16", "reduce_dtype": "bfloat16",
                                     "buffer_dtype": "bfloat16"}
    assert not (tmp / "out").exists()  # a dry run creates nothing

    code, envelope = air.json("train", "--dry-run", "--set", "max_steps=4",
                              "--set", "warmup_steps=2", "--set", "warmup_ratio=0", env=env)
    assert code == 0, envelope
    assert envelope["data"]["total_steps"] == 4
    assert envelope["data"]["warmup_steps"] == 2

    proc = air("train", "--dry-run", "--set", "learning_rate=fast", env=env)
    assert proc.returncode == 2
    assert "--set learning_rate=fast: learning_rate: expected a number, got 'fast'" in proc.stderr


def test_train_writes_progress_metrics_and_a_checkpoint_transformers_loads(air, tmp, tiny):
    model_dir, data = tiny
    out = tmp / "out"
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(out), per_device_batch_size=2, max_steps=5,
                       learning_rate=5e-3, logging_steps=2, save_steps=2, seed=5)
    proc = air("train", "--config", cfg, "--threads", 2)
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stdout.splitlines() if l.startswith("step ")]
    # On a pipe: one full line every logging_steps (2) and one for the last step.
    assert len(lines) == 3, proc.stdout
    for i, line in zip((2, 4, 5), lines):
        assert line.startswith(f"step {i}/5 | loss ")
        for part in ("| lr ", "| grad norm ", " tok/s |", "| elapsed ", "| ETA "):
            assert part in line, line
    assert "\r" not in proc.stdout
    assert "trained 5 steps" in proc.stdout

    metrics = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [2, 4, 5]
    for m in metrics:
        assert set(m) >= {"step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "elapsed_s"}
        assert m["tokens"] > 0 and m["tokens_per_s"] > 0
    for d in (out, out / "checkpoint-2", out / "checkpoint-4"):
        for name in ("config.json", "model.safetensors", "generation_config.json",
                     "tokenizer.json", "tokenizer_config.json"):
            assert (d / name).exists(), d / name

    model = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    weights = load_file(str(out / "model.safetensors"))
    for name, value in model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    initial = load_file(str(model_dir / "model.safetensors"))
    assert any(not torch.equal(weights[k], initial[k]) for k in initial)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert tok.eos_token == "<|end_of_text|>"


def test_progress_updates_in_place_on_a_terminal(air_bin, air_home, tmp, tiny):
    model_dir, data = tiny
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(tmp / "out"), per_device_batch_size=2, max_steps=3)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([air_bin, "train", "--config", str(cfg), "--threads", "1"],
                            stdout=follower, stderr=subprocess.PIPE, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    os.close(leader)
    text = b"".join(chunks).decode()
    assert text.count("\rstep ") == 3, repr(text)
    assert "\rstep 3/3 | loss " in text


def test_several_workers_plan_a_sharded_run(air, tmp, tiny):
    model_dir, data = tiny
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(tmp / "out"))
    launched = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                    MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
    proc = air("train", "--config", cfg, "--dry-run", env=launched)
    assert proc.returncode == 0, proc.stderr
    assert "ranks    2 (rank 0 of 2" in proc.stdout and "FULL_SHARD over gloo" in proc.stdout
    # Two ranks on this host share its cores (training itself: test_train_distributed.py).
    per_rank = max(1, len(os.sched_getaffinity(0)) // 2)
    assert f"{per_rank} thread{'' if per_rank == 1 else 's'} per rank" in proc.stdout
    # WORLD_SIZE without RANK is no launcher's environment: invalid input naming RANK.
    proc = air("train", "--config", cfg, "--dry-run", env=dict(os.environ, WORLD_SIZE="2"))
    assert proc.returncode == 2, proc.stderr
    assert "RANK" in proc.stderr
    proc = air("train", "--config", cfg, "--dry-run", env=dict(os.environ, WORLD_SIZE="1"))
    assert proc.returncode == 0, proc.stderr


def test_plan_names_threads_and_cpu_kernels(air, tmp, tiny):
    model_dir, data = tiny
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(tmp / "out"))
    proc = air("train", "--config", cfg, "--dry-run", "--threads", "3")
    assert proc.returncode == 0, proc.stderr
    assert "compute  CPU, fp32, 3 threads, " in proc.stdout
    proc = air("train", "--config", cfg, "--dry-run", "--threads", "1",
               env=dict(os.environ, AIR_CPU_KERNELS="generic"))
    assert "compute  CPU, fp32, 1 thread, generic kernels" in proc.stdout
    proc = air("train", "--config", cfg, "--dry-run", env=dict(os.environ, AIR_CPU_KERNELS="avx3"))
    assert proc.returncode == 0, proc.stderr
    assert "AIR_CPU_KERNELS=avx3 is not one of avx512bf16, avx512, avx2, generic; ignored" in proc.stdout


def test_device_cuda_without_a_usable_gpu_names_what_is_missing_and_the_cpu_path(air, tmp, tiny):
    """On a machine without a GPU (CI), `--device cuda` stops before loading anything with an
    error naming the parameter, why CUDA cannot be used and the CPU path; `--device auto` trains
    on the CPU and says why; a device that is not one is refused with the valid ones."""
    model_dir, data = tiny
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(tmp / "out"))
    proc = air("train", "--config", cfg, "--dry-run", "--device", "cuda")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the machine's, not a usage error
    assert "--set device=cuda: device: " in proc.stderr, proc.stderr
    assert "CUDA" in proc.stderr and "device: cpu" in proc.stderr, proc.stderr
    proc = air("train", "--config", cfg, "--dry-run", "--device", "auto")
    assert proc.returncode == 0, proc.stderr
    assert "compute  CPU, fp32" in proc.stdout, proc.stdout
    assert "note     device: auto trains on the CPU: " in proc.stdout, proc.stdout
    cfg = write_config(tmp / "bad.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(tmp / "out"), device="gpu")  # sorted: line 2
    proc = air("train", "--config", cfg, "--dry-run")
    assert proc.returncode == 2
    assert "bad.yaml:2:1: device: 'gpu' is not a device; valid: cpu, cuda, cuda:N, auto" in \
        proc.stderr, proc.stderr


def test_chat_and_alpaca_datasets_train_through_the_tokenizer(air, tmp):
    model_dir = tmp / "chat_model"
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    transformers.LlamaForCausalLM(config).save_pretrained(model_dir)
    make_tokenizer(model_dir, chat=True)
    chat = tmp / "chat.jsonl"
    chat.write_text("\n".join(json.dumps({"messages": [
        {"role": "user", "content": f"Say {w}."}, {"role": "assistant", "content": w}]})
        for w in ["fox", "dog", "capital", "model"]) + "\n")
    alpaca = tmp / "alpaca.json"
    alpaca.write_text(json.dumps([{"instruction": "Add.", "input": f"{i} + 1", "output": str(i + 1)}
                                  for i in range(6)]))
    for data, kind in ((chat, "chat records"), (alpaca, "alpaca records")):
        out = tmp / f"out_{data.stem}"
        cfg = write_config(tmp / f"{data.stem}.yaml", model_name=str(model_dir),
                           dataset_name=str(data), output_dir=str(out), per_device_batch_size=2,
                           max_steps=2, packing=True, max_seq_len=64)
        code, env = air.json("train", "--config", cfg)
        assert code == 0, env
        assert env["data"]["dataset_kind"] == kind
        assert env["data"]["steps"] == 2
        assert (out / "model.safetensors").exists()


def test_a_bad_dataset_record_names_file_and_line(air, tmp, tiny):
    model_dir, _ = tiny
    data = tmp / "bad.jsonl"
    data.write_text('{"instruction": "a", "output": "b"}\n{"instruction": "a"\n')
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(tmp / "out"))
    proc = air("train", "--config", cfg, "--dry-run")
    assert proc.returncode != 0
    assert "dataset_name:" in proc.stderr and "bad.jsonl:2" in proc.stderr


def test_output_dir_problems_are_caught_before_loading(air, tmp, tiny):
    """output_dir is checked with the other parameters (named, with where it was given): the
    model's own directory would have its weights overwritten by the checkpoint, a file is no
    directory; and nothing is created by a dry run."""
    model_dir, data = tiny
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(model_dir))
    before = (model_dir / "model.safetensors").read_bytes()
    proc = air("train", "--config", cfg, "--set", "max_steps=1")
    assert proc.returncode == 2, proc.stderr
    assert f"{cfg}:3:1: output_dir: {model_dir} is the model directory" in proc.stderr
    assert (model_dir / "model.safetensors").read_bytes() == before
    (tmp / "afile").write_text("x")
    for out, says in ((tmp / "afile", f"{tmp}/afile is a file, not a directory"),
                      (tmp / "afile" / "sub", f"{tmp}/afile/sub cannot be created: {tmp}/afile "
                                              "is a file")):
        proc = air("train", "--config", cfg, "--set", f"output_dir={out}", "--dry-run")
        assert proc.returncode == 2, proc.stderr
        assert f"--set output_dir={out}: output_dir: {says}" in proc.stderr


def test_odd_but_legal_sizes_train_or_explain(air, tmp, tiny):
    model_dir, data = tiny  # 10 pre-tokenized examples
    cfg = write_config(tmp / "c.yaml", model_name=str(model_dir), dataset_name=str(data),
                       output_dir=str(tmp / "out"), per_device_batch_size=1)
    # Epochs that overflow the step counter: an error naming the parameter, not a wrapped count.
    proc = air("train", "--config", cfg, "--set", "num_train_epochs=1e300", "--dry-run")
    assert proc.returncode == 2
    assert "num_train_epochs: 1e+300 epochs of 10 optimizer steps is more than" in proc.stderr
    # Accumulating over more micro-batches than an epoch has: said in the plan.
    code, env = air.json("train", "--config", cfg, "--set", "gradient_accumulation_steps=25",
                         "--dry-run")
    assert code == 0, env
    assert env["data"]["total_steps"] == 1
    assert any("each optimizer step reads a whole epoch, its last 15 micro-batches only padding"
               in n for n in env["data"]["notes"]), env["data"]["notes"]
    # global_batch_size: the accumulation derived (1 process of 1 row: 4 micro-batches), every
    # step of an epoch counted: ceil(10 / 4) = 3.
    code, env = air.json("train", "--config", cfg, "--set", "global_batch_size=4", "--dry-run")
    assert code == 0, env
    assert env["data"]["gradient_accumulation_steps"] == 4
    assert env["data"]["global_batch_size"] == 4
    assert env["data"]["total_steps"] == 3
    # A batch far larger than the data is one batch of the data (it used to allocate a
    # 100000-row batch of padding and be killed for memory).
    dump = tmp / "batches.jsonl"
    code, env = air.json("train", "--config", cfg, "--set", "per_device_batch_size=100000",
                         "--set", "max_steps=1", "--dump-batches", dump)
    assert code == 0, env
    batch = json.loads(dump.read_text().splitlines()[0])
    assert len(batch["input_ids"]) == 10


def test_a_model_too_big_for_memory_is_refused_before_allocating(air, tmp, tiny):
    """An 8e15-parameter config (vocab 1e12): `air model init` used to abort (std::bad_alloc) and
    an 8B one was killed by the kernel's OOM killer; train and generate would do the same."""
    model_dir, data = tiny
    huge = tmp / "huge"
    huge.mkdir()
    config = json.loads((model_dir / "config.json").read_text())
    config.update(vocab_size=10**12, hidden_size=4096, num_attention_heads=32)
    (huge / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (huge / name).write_bytes((model_dir / name).read_bytes())
    proc = air("model", "init", "--config", huge / "config.json", "--out", tmp / "init")
    assert proc.returncode == 1
    assert "the model needs at least" in proc.stderr and "for initialization" in proc.stderr
    assert not (tmp / "init").exists()
    proc = air("generate", "--model", huge, "--prompt", "hi")
    assert proc.returncode == 1 and "for generation" in proc.stderr
    cfg = write_config(tmp / "c.yaml", model_name=str(huge), dataset_name=str(data),
                       output_dir=str(tmp / "out"))
    proc = air("train", "--config", cfg)
    assert proc.returncode == 1
    assert f"{cfg}:" in proc.stderr
    assert f"model_name: {huge}: the model needs at least" in proc.stderr
    assert "for training" in proc.stderr and "AdamW moments" in proc.stderr
