"""The second seed's notebook cell (distributed_fixtures/seed_cell.py, copied from the seed with
its indentation restored) trains under air with TRL's SFTTrainer and PEFT LoRA on 2 CPU ranks.
The test changes only what cannot run here, each change asserted to apply exactly once:
  - the decorator's shape: gpus=2, gpu_type='CPU', remote=False (2 CPU ranks on this machine);
  - MODEL_NAME, the dataset and OUTPUT_DIR: a tiny random Llama built with transformers, a
    local chat dataset (`messages` rows), a temporary directory;
  - the FSDP knobs off (fsdp="", no fsdp_config) and use_cpu=True next to bf16=True, without
    which transformers refuses bf16 on a host with no GPU;
  - two SFTConfig arguments that transformers 5 removed: overwrite_output_dir (dropped) and
    warmup_ratio (now warmup_steps, which takes a ratio below 1).
torch.cuda.set_device(local_rank) stays: on CPU ranks air makes it a no-op (docs/python.md)."""
import json
import os
import re
import subprocess
import sys

from distributed_fixtures.helpers import air_json, py_env  # noqa: F401
from distributed_fixtures.tiny_llama import build_chat_dataset, build_tiny_llama
from runtime_jobs.helpers import assert_no_processes_left

SEED_CELL = __import__("pathlib").Path(__file__).parent / "distributed_fixtures" / "seed_cell.py"


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"expected exactly one {old!r} in the seed cell"
    return text.replace(old, new)


def adapted_cell(model_dir, data_dir, output_dir) -> str:
    cell = SEED_CELL.read_text()
    cell = replace_once(cell, "@distributed(gpus=8, gpu_type='H100', remote=True)",
                        "@distributed(gpus=2, gpu_type='CPU', remote=False)")
    cell = replace_once(cell, 'MODEL_NAME = "openai/gpt-oss-120b"',
                        f"MODEL_NAME = {str(model_dir)!r}")
    cell = replace_once(cell, 'load_dataset("HuggingFaceH4/Multilingual-Thinking", split="train")',
                        f'load_dataset({str(data_dir)!r}, split="train")')
    cell = replace_once(cell, 'OUTPUT_DIR = f"/tmp/gpt-oss-120b-finetune_2"',
                        f"OUTPUT_DIR = {str(output_dir)!r}")
    cell = replace_once(cell, 'fsdp="full_shard auto_wrap",', 'fsdp="",')
    block = re.search(r"        fsdp_config=\{\n.*?\n        \},\n", cell, re.S).group(0)
    cell = replace_once(cell, block, "        fsdp_config=None,\n")
    cell = replace_once(cell, "bf16=True,", "bf16=True, use_cpu=True,")
    cell = replace_once(cell, "        overwrite_output_dir=True,\n", "")
    cell = replace_once(cell, "warmup_ratio=0.03,", "warmup_steps=0.03,")
    return cell


def test_seed_cell_trains_with_trl_and_lora_on_two_ranks(py_env, air_bin, air_home,  # noqa: F811
                                                         tmp_path):
    model = build_tiny_llama(tmp_path / "tiny-llama")
    data = build_chat_dataset(tmp_path / "chat-data", rows=8)
    script = py_env / "notebook_cell.py"
    script.write_text(adapted_cell(model, data, tmp_path / "finetune-out") + (
        "\nresult = train_gpt_oss_fsdp_120b.distributed()\n"
        "import json\nprint('RESULT ' + json.dumps({'values': list(result), "
        "'run_id': result.run_id}))\n"))
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1")  # the ranks inherit it: nothing is downloaded
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=py_env, env=env, timeout=1200)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, (out[-4000:], err[-8000:])
    result = json.loads(out.split("RESULT ", 1)[1])
    assert result["values"] == [None, None]  # the cell's function returns nothing
    for rank in (0, 1):
        assert f"[rank {rank}] [rank {rank}] dist.is_initialized() -> True" in out, out
        assert f"[rank {rank}] [rank {rank}] accelerator.num_processes = 2" in out, out
        assert (f"[rank {rank}] [rank {rank}] accelerator.distributed_type = "
                f"DistributedType.MULTI_CPU") in out, out
    assert "[rank 0] Training complete (FSDP)." in out, out
    assert "[rank 0] Dataset size: 8" in out and "trainable params" in out, out
    metrics = [line for line in out.splitlines() if line.startswith("[rank 0] {") and
               "train_loss" in line]
    assert metrics, out
    run = air_json(air_bin, "get", result["run_id"])
    assert run["state"] == "SUCCEEDED", run
    assert_no_processes_left(air_home, run)
