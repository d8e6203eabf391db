"""The first seed's train.py (examples/multinode_llm_sft/train.py, the seed's script verbatim)
under `air run` on 2 nodes x 2 processes. Only its device lines are switched to CPU and gloo;
its `import mlflow` and tracking calls are untouched. It resumes the MLflow run air created at
submit (MLFLOW_RUN_ID), logs its params and per-step train_loss into air's tracking server, and
the run ends FINISHED. A tiny Llama in a local Hugging Face cache layout and a local
alpaca-style dataset stand in for the 8B model and tatsu-lab/alpaca."""
import json
import os
import pathlib
import shutil
import sys

import torch
import transformers

from runtime_jobs.helpers import submit, wait_terminal, write_spec
from tracking_helpers import run_mlflow

REPO = pathlib.Path(__file__).resolve().parents[2]
SEED_SCRIPT = REPO / "examples" / "multinode_llm_sft" / "train.py"
TOKENIZER = REPO / "examples" / "data" / "tiny_instruct" / "tokenizer"

# The seed's device lines and their CPU/gloo replacements; each must occur exactly once.
DEVICE_LINES = [
    ('dist.init_process_group(backend="nccl")', 'dist.init_process_group(backend="gloo")'),
    ("torch.cuda.set_device(local_rank)", "torch.set_num_threads(1)"),
    ('device = torch.device(f"cuda:{local_rank}")', 'device = torch.device("cpu")'),
    ("device_id=local_rank,", 'device_id=torch.device("cpu"),'),
]


def cpu_script(text: str) -> str:
    for old, new in DEVICE_LINES:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def make_hf_cache(hf_home: pathlib.Path, repo_id: str) -> None:
    """A tiny Llama saved where huggingface_hub looks up `repo_id` offline."""
    snapshot = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("a" * 40)
    tok = json.loads((TOKENIZER / "tokenizer.json").read_text())
    vocab = len(tok["model"]["vocab"]) + len(tok.get("added_tokens", []))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128)
    transformers.LlamaForCausalLM(config).save_pretrained(snapshot, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / name, snapshot / name)


def make_alpaca(directory: pathlib.Path, rows: int = 48) -> None:
    directory.mkdir()
    with open(directory / "train.jsonl", "w") as f:
        for i in range(rows):
            f.write(json.dumps({"instruction": f"Add {i} and {i + 1}.",
                                "input": "" if i % 2 else f"numbers {i}, {i + 1}",
                                "output": f"The sum is {2 * i + 1}."}) + "\n")


def test_seed_train_py_logs_into_air_tracking(air, air_home, tmp_path, monkeypatch):
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(cpu_script(SEED_SCRIPT.read_text()))
    hf_home = tmp_path / "hf"
    make_hf_cache(hf_home, "air-test/tiny-llama")
    make_alpaca(tmp_path / "alpaca")
    command = ('cd "$CODE_SOURCE_PATH"\n'
               'torchrun --nnodes="$NUM_NODES" --node_rank="$NODE_RANK" '
               '--nproc_per_node="$LOCAL_WORLD_SIZE" --master_addr="$MASTER_ADDR" '
               '--master_port="$MASTER_PORT" train.py\n')
    spec = write_spec(
        tmp_path, command, name="seed-sft", nodes=2, per_node=2, timeout_minutes=10,
        mlflow_run_name="seed-on-cpu",
        code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
        env_variables={"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1",
                       "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "ds"),
                       "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                       "GIT_PYTHON_REFRESH": "quiet"},
        parameters={"model_name": "air-test/tiny-llama", "dataset_name": str(tmp_path / "alpaca"),
                    "max_seq_len": 32, "per_device_batch_size": 2,
                    "gradient_accumulation_steps": 1, "learning_rate": 0.001, "max_steps": 4,
                    "output_dir": str(tmp_path / "out")})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=400)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED", (run, logs[0][-3000:], logs[1][-3000:])
    assert "step=4/4" in logs[0]
    url = json.loads((air_home / "tracking" / "server.json").read_text())["url"]
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        c = MlflowClient()
        run = c.get_run({run["mlflow_run_id"]!r})
        exp = c.get_experiment(run.info.experiment_id)
        history = c.get_metric_history(run.info.run_id, "train_loss")
        found = c.search_runs([exp.experiment_id], "tags.`air.run_id` = '{run_id}'")
        print(json.dumps({{"status": run.info.status, "name": run.info.run_name,
                           "experiment": exp.name, "params": run.data.params,
                           "tags": run.data.tags, "steps": [m.step for m in history],
                           "losses": [m.value for m in history],
                           "found": [r.info.run_id for r in found]}}))
    """, url)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["status"] == "FINISHED"
    assert got["name"] == "seed-on-cpu" and got["experiment"] == "seed-sft"
    assert got["params"] == {"model_name": "air-test/tiny-llama", "lr": "0.001",
                             "batch_size": "2", "world_size": "4"}
    assert got["steps"] == [1, 2, 3, 4]
    printed = [float(line.split("loss=")[1].split()[0]) for line in logs[0].splitlines()
               if "step=" in line and "loss=" in line]
    assert [round(v, 4) for v in got["losses"]] == printed
    assert got["tags"]["air.run_id"] == str(run_id) and got["tags"]["air.num_nodes"] == "2"
    assert got["tags"]["air.state"] == "SUCCEEDED"
    assert got["found"] == [run["mlflow_run_id"]]
