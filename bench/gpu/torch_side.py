"""The PyTorch sides of bench/gpu/bench.py: each one torch_worker.py process (so its GPU memory
is freed before the next side), with its flags, environment and peak-memory sampler.

  torch-seed  the first seed's recipe: FSDP1 FULL_SHARD with MixedPrecision(bf16 x3), auto-wrap
              on LlamaDecoderLayer, activation checkpointing, AdamW (foreach), clip 1.0, over an
              NCCL process group of one (gloo on the CPU)
  torch-best  PyTorch's fastest path on one GPU: no FSDP (at world size 1 it has nothing to
              shard: FSDP1 itself runs NO_SHARD there), the model in bf16, torch.compile per
              decoder layer, fused AdamW, activation checkpointing off; when that runs out of
              memory, again with checkpointing on (the result says which). --best-fsdp keeps
              FSDP1 (use_orig_params=True) under the compiled layers instead.
  peft-seed   the second seed's recipe on a GPT-OSS shape: GptOssForCausalLM from_pretrained
              from air's model files in bf16 onto the device, eager attention (the seed's
              attn_implementation), transformers' default experts implementation (--peft-experts
              picks one), peft.get_peft_model with the seed's LoraConfig, non-reentrant
              activation checkpointing on every decoder layer, the forward under autocast(bf16)
              (SFTConfig bf16=True), fused AdamW over the adapters (TrainingArguments' default
              adamw_torch_fused), clip 1.0. No FSDP: on one GPU FSDP1 has nothing to shard (it
              runs NO_SHARD), and the issue's anchor (3,295 tok/s on an H200) names none.
An FSDP side whose NCCL group fails is run again over gloo (a group of one moves nothing; the
result's note says so), so one missing transport does not cost the side.
"""
import json
import os
import pathlib
import subprocess
import sys
import time

import common  # bench/fsdp/common.py: free_port

WORKER = pathlib.Path(__file__).with_name("torch_worker.py")


def worker_env(device, gpu):
    env = dict(os.environ)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(common.free_port()), RANK="0",
               WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
               NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo",
               TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="error")
    env["CUDA_VISIBLE_DEVICES"] = str(gpu) if device == "cuda" else ""
    return env


def worker_flags(side, args, recipe, ac, model_dir=None):
    flags = ["--steps", str(args.steps), "--warmup", str(args.warmup),
             "--batch", str(recipe.batch), "--seq", str(recipe.seq),
             "--accum", str(recipe.accum), "--lr", str(recipe.lr),
             "--weight-decay", str(recipe.weight_decay), "--clip", str(recipe.clip)]
    if side == "peft-seed":
        lora = recipe.lora
        flags += ["--model-dir", str(model_dir), "--attn", "eager", "--autocast", "--fused-adam",
                  "--lora", f"{lora['r']},{lora['alpha']:g},{lora['dropout']:g},"
                  f"{lora['target_modules']}"]
        flags += ["--experts", args.peft_experts] if args.peft_experts else []
    elif side == "torch-seed":
        flags += ["--fsdp"]
    else:
        flags += ["--compile", args.best_compile, "--fused-adam"]
        flags += ["--fsdp"] if args.best_fsdp else []
    return flags + (["--ac"] if ac else [])


def run_worker(flags, config, rows, out, device, sampler, env, log, timeout):
    """One torch_worker.py process; its --out JSON plus the wall time and the sampled peak."""
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(WORKER), "--config", str(config), "--rows", str(rows),
           "--out", str(out), "--device", device] + flags
    start = time.perf_counter()
    with open(log, "w") as log_file:
        sampler.start()
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env)
        sampler.set_pid(proc.pid)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()  # this worker only, by its pid
            proc.wait()
            timed_out = True
        peak = sampler.stop()
    result = json.loads(out.read_text()) if out.exists() else {}
    result.update(wall_s=time.perf_counter() - start, peak_bytes=peak)
    if timed_out or proc.returncode != 0 or result.get("error") or "tokens_per_s" not in result:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        why = f"timed out after {timeout:.0f} s" if timed_out else f"exit {proc.returncode}"
        result.update(status="failed",
                      error=f"torch worker {why}:\n{result.get('error') or tail}")
    else:
        result["status"] = "ok"
    return result


def run_side(side, args, recipe, config, rows, work, device, new_sampler, env, timeout,
             model_dir=None):
    """torch-seed, peft-seed (from model_dir's files), or torch-best (AC off first, AC on after
    an out-of-memory failure). `new_sampler()` gives a fresh PeakSampler with the idle baseline
    read now."""
    ac_first = side in ("torch-seed", "peft-seed") or args.best_ac
    flags = worker_flags(side, args, recipe, ac_first, model_dir)
    result = run_worker(flags, config, rows, work / f"{side}.json", device, new_sampler(), env,
                        work / f"{side}.log", timeout)
    result["ac"] = ac_first
    retry, note = None, None
    if result["status"] == "ok":
        pass
    elif side == "torch-best" and not ac_first and result.get("oom"):
        retry = worker_flags(side, args, recipe, True, model_dir)
        note = "AC on: AC off ran out of memory"
    elif "--fsdp" in flags and device == "cuda" and "nccl" in result["error"].lower():
        retry = flags + ["--backend", "gloo"]  # a group of one: the backend moves nothing
        note = "gloo process group: NCCL failed"
    if retry is None:
        return result
    print(f"  {side}: {note.split(': ', 1)[1]}; again ({note.split(':', 1)[0]})", flush=True)
    first_error = result["error"]
    result = run_worker(retry, config, rows, work / f"{side}_retry.json", device,
                        new_sampler(), env, work / f"{side}_retry.log",
                        max(60.0, timeout - result["wall_s"]))
    result.update(ac="--ac" in retry, note=note, first_error=first_error[-1500:])
    return result
