"""The air sides of bench/gpu/bench.py: the model (`air model init` or transformers' init, cached),
the YAML (full fine-tuning, or LoRA: use_peft with the recipe's LoraConfig), the dry run (which
keys air accepts, its own memory estimate) and one `air train` run, whose tokens/s
come from output_dir/metrics.jsonl (src/engine/train/step_metrics.cc: step, loss, lr,
grad_norm, tokens, tokens_per_s, elapsed_s, epoch) between the warm-up's last step and the last
step, as bench/fsdp/common.AirRun computes them.

air has no parameter that skips the final checkpoint (fp32 masters: 32 GB for the 8B shape), so
once metrics.jsonl holds the last step the process is killed (SIGKILL, by its pid) and its
output_dir deleted, unless keep_save: the save is no part of the timed steps either way.
"""
import json
import os
import shutil
import subprocess
import sys
import time

import common  # bench/fsdp/common.py (bench.py puts bench/fsdp on sys.path)
import shapes
import torch_side

GB = 1e9


def air_cmd(air, *args):
    try:
        proc = subprocess.run([air, *args], capture_output=True, text=True)
    except OSError as e:  # no such binary
        return 127, "", f"{air}: {e}"
    return proc.returncode, proc.stdout, proc.stderr


def init_model(air, cfg, model_dir, how="air", device="cuda", gpu=0):
    """A random-initialized bf16 model of `cfg` in model_dir, unless one of exactly this config
    is already there: `air model init --dtype bfloat16` (how="air"; one thread: minutes for 8B
    parameters) or transformers' init on the device and save_pretrained (how="torch", seconds).
    Returns (seconds, reused: how the reused model was made or False, error)."""
    marker = model_dir / "bench_config.json"
    if marker.exists() and json.loads(marker.read_text()).get("config") == cfg:
        return 0.0, json.loads(marker.read_text())["how"], None
    partial = model_dir.with_name(model_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(model_dir, ignore_errors=True)
    partial.mkdir(parents=True)
    need = 2 * shapes.parameter_count(cfg) + GB  # bf16 safetensors, and a margin
    free = shutil.disk_usage(partial).free
    if free < need:
        return 0.0, False, (f"model init: the bf16 model needs {need / GB:.1f} GB in "
                            f"{partial.parent} but its file system has {free / GB:.1f} GB free; "
                            "pass --cache DIR on one with room (or free space there)")
    config = partial.parent / f"{model_dir.name}_init_config.json"
    config.write_text(json.dumps(cfg, indent=1))
    start = time.perf_counter()
    if how == "air":
        cmd = [air, "model", "init", "--config", str(config), "--out", str(partial),
               "--dtype", "bfloat16", "--force"]
        env = None
    else:
        cmd = [sys.executable, str(torch_side.WORKER), "--config", str(config), "--device",
               device, "--save-model", str(partial), "--out", str(partial.parent / "init.json")]
        env = torch_side.worker_env(device, gpu)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        return seconds, False, (f"model init ({how}) failed ({proc.returncode}):\n"
                                f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    (partial / "bench_config.json").write_text(json.dumps({"config": cfg, "how": how}))
    partial.rename(model_dir)  # a killed init leaves only the .partial directory
    return seconds, False, None


def write_rows(path, rows, seq, vocab):
    """`rows` pre-tokenized rows of `seq` random ids (bench/train_step's generator), cached."""
    if path.exists() and sum(1 for _ in path.open()) == rows:
        return
    common.write_rows(path, rows, seq, vocab)


def write_config(path, model_dir, rows_file, out_dir, recipe, total_steps):
    """The recipe as `air train` keys: bf16: true, activation checkpointing, a constant lr; with
    recipe.lora, use_peft and TRL's lora_* keys (the frozen base stays bf16, the adapters
    train in fp32: docs/engine-lora.md)."""
    lora = recipe.lora
    peft = {} if not lora else {
        "use_peft": "true", "lora_r": lora["r"], "lora_alpha": lora["alpha"],
        "lora_dropout": lora["dropout"], "lora_target_modules": lora["target_modules"]}
    common.train_config(
        path, model_name=model_dir, dataset_name=rows_file, output_dir=out_dir,
        max_seq_len=recipe.seq, per_device_batch_size=recipe.batch,
        gradient_accumulation_steps=recipe.accum, max_steps=total_steps,
        learning_rate=recipe.lr, weight_decay=recipe.weight_decay,
        max_grad_norm=recipe.clip, bf16="true", activation_checkpointing="true",
        lr_scheduler_type="constant", logging_steps=1, save_steps=0, **peft)


def dry_run(air, config, device, sets):
    """`air -o json train --dry-run`: (data, None) or (None, the error's last lines)."""
    args = ["-o", "json", "train", "--config", str(config), "--device", device, "--dry-run"]
    for s in sets:
        args += ["--set", s]
    rc, out, err = air_cmd(air, *args)
    doc = common._envelope(out)  # noqa: SLF001 (bench/fsdp's -o json reader)
    if rc != 0 or doc is None:
        return None, error_message(out + err)
    return doc["data"], None


def error_message(text):
    """The message of air's -o json error envelope, else the text's last lines."""
    for line in reversed(text.splitlines()):
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            return doc["error"].get("message", line)
    return "\n".join(text.strip().splitlines()[-6:])


def read_metrics(path):
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line being written
    return rows


def plan_lines(log_text):
    """The plan's compute and memory lines (what air says it runs, and its estimate)."""
    return [l.strip() for l in log_text.splitlines()
            if l.startswith(("compute", "memory")) or l.strip().startswith("+ activations")]


def run_train(air, config, out_dir, device, sets, total_steps, warmup, sampler, env, log,
              timeout, keep_save=False, threads=None):
    """One `air train`; returns the side's result dict (status ok or failed)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [air, "train", "--config", str(config), "--device", device]
    for s in sets:
        cmd += ["--set", s]
    if threads:
        cmd += ["--threads", str(threads)]
    metrics_path = out_dir / "metrics.jsonl"
    start = time.perf_counter()
    with open(log, "w") as log_file:
        sampler.start()
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env)
        sampler.set_pid(proc.pid)
        killed = timed_out = False
        while proc.poll() is None:
            time.sleep(0.2)
            steps = [m for m in read_metrics(metrics_path) if "step" in m]
            killed = bool(steps) and steps[-1]["step"] >= total_steps and not keep_save
            timed_out = time.perf_counter() - start > timeout
            if killed or timed_out:  # killed: the last step is logged, skip the final save
                proc.kill()
                break
        proc.wait()
        peak = sampler.stop()
    wall = time.perf_counter() - start
    steps = [m for m in read_metrics(metrics_path) if "step" in m and "loss" in m]
    text = log.read_text()
    shutil.rmtree(out_dir, ignore_errors=True)  # the checkpoint: GBs we never read
    result = {"wall_s": wall, "peak_bytes": peak, "plan": plan_lines(text),
              "killed_after_last_step": killed}
    if len(steps) < total_steps or (proc.returncode != 0 and not killed):
        why = f"timed out after {timeout:.0f} s" if timed_out else f"exit {proc.returncode}"
        result.update(status="failed", error=f"air train {why} after {len(steps)} of "
                      f"{total_steps} steps:\n" + "\n".join(text.splitlines()[-25:]))
        if not (timed_out and len(steps) > warmup):
            return result
        # Slow but running: the steps it logged after the warm-up still measure it.
        result.update(status="ok", note=f"timed out: {len(steps) - warmup} timed steps, "
                      f"not {total_steps - warmup}")
    own_peaks = [m["peak_memory_bytes"] for m in steps if "peak_memory_bytes" in m]
    if own_peaks:  # air's own count, as torch.cuda.max_memory_allocated is the torch sides'
        result["max_allocated"] = max(own_peaks)
    run = common.AirRun({}, steps, [None])
    result.update(status="ok", tokens_per_s=run.tokens_per_s(warmup),
                  losses=[m["loss"] for m in steps], first_step_s=steps[0]["elapsed_s"],
                  warmup_s=steps[warmup - 1]["elapsed_s"])
    return result


def run_side(air, work, model_dir, rows_file, recipe, steps, warmup, device, sets, sampler,
             env, timeout, keep_save=False, name="air", threads=None):
    """Config, dry run, then the run; a dry run that refuses (e.g. an unknown key) skips the
    side with air's message."""
    total = steps + warmup
    config, out_dir = work / f"{name}.yaml", work / f"{name}_out"
    write_config(config, model_dir, rows_file, out_dir, recipe, total)
    plan, error = dry_run(air, config, device, sets)
    if error is not None:
        return {"status": "refused", "error": f"`air train --dry-run"
                f"{''.join(' --set ' + x for x in sets)}` refused it: {error}"}
    result = run_train(air, config, out_dir, device, sets, total, warmup, sampler, env,
                       work / f"{name}.log", timeout, keep_save, threads)
    memory = plan.get("memory", {})
    result["estimate_bytes"] = memory.get("total_bytes_per_rank", memory.get("bytes_per_rank"))
    result["precision"] = plan.get("precision")
    result["config"] = config.read_text()
    return result


def air_env(device, gpu):
    env = dict(os.environ)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT"):
        env.pop(key, None)  # one process, no launcher
    if device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return env
