#!/usr/bin/env python3
"""air vs PyTorch on one GPU: throughput, MFU and peak memory of the seeds' recipes on random-init
shapes (Llama full fine-tuning, GPT-OSS LoRA), every side in the same run on the same GPU, one
process per side.

Llama sides (--sides; each --warmup untimed optimizer steps, then --steps timed ones):
  torch-seed   the first seed's recipe in PyTorch: transformers' LlamaForCausalLM from the
               config in bf16 on the GPU, FSDP1 FULL_SHARD + MixedPrecision(bf16 x3), auto-wrap
               on LlamaDecoderLayer, non-reentrant activation checkpointing, AdamW, clip 1.0,
               NCCL at world size 1 (bench/gpu/torch_side.py, torch_worker.py)
  torch-best   PyTorch's best single-GPU path: no FSDP, bf16, torch.compile per decoder layer,
               fused AdamW, activation checkpointing off (on again if off runs out of memory)
  air          `air train --device cuda`: bf16: true (fp32 masters and AdamW state, bf16
               compute), activation checkpointing, the model from `air model init` (bf16,
               cached in --cache), the same pre-tokenized random rows; this is air's FSDP at
               world size 1 (every `air train` is FSDP FULL_SHARD over its group, one process
               a group of one)
  air-bf16     the same with `--set torch_dtype=bfloat16`: bf16 weights, gradients and AdamW
               state, the torch sides' own semantics (an air that rejects the key is skipped with
               its message)
The recipe (bench/gpu/shapes.py): batch 4 x 1024 tokens, gradient accumulation 2, AdamW lr
2e-5 (constant), weight decay 0, clip 1.0. Shapes: llama-1b (Llama-3.2-1B: tied, llama3 RoPE
scaling) and llama-8b (Llama-3.1-8B).
GPT-OSS sides (the second seed's LoRA; shape gpt-oss-20b: openai/gpt-oss-20b's config.json,
bf16 experts instead of MXFP4; both read the same random model, written once by transformers on
the device and cached in --cache):
  peft-seed    the second seed's recipe in PyTorch: GptOssForCausalLM from_pretrained in bf16,
               eager attention, peft.get_peft_model(LoraConfig(r=16, lora_alpha=16,
               target_modules="all-linear", lora_dropout=0.05, bias="none")) (on GPT-OSS
               all-linear is q/k/v/o_proj: experts and router are no nn.Linear), non-reentrant
               activation checkpointing, autocast bf16, fused AdamW, clip 1.0 (torch_side.py)
  air-lora     `air train --device cuda` with use_peft and the same LoRA keys, bf16: true (the
               frozen base in bf16, the adapters in fp32), activation checkpointing
The recipe: batch 1 x 2048 tokens, gradient accumulation 4, AdamW lr 1.5e-4 (constant; the
seed's cosine changes no step's cost), weight decay 0, clip 1.0. The table's "vs seed" column
and the closing line are air-lora / peft-seed, with the GPU's name and issue 31's bar (>= 3x
the 3,295 tok/s PyTorch + PEFT made on an H200, >= 25% MFU, peak memory below PyTorch's).

Per side it prints tokens/s over the timed steps (air's from its metrics.jsonl), MFU =
(6·N_active + 12·d_attn·ΣT_l)·tok/s ÷ --peak-tflops (N_active: every parameter a token goes
through, embeddings and head included: all of them for Llama, the top-4 of 32 experts for
GPT-OSS; d_attn: heads x head_dim; T_l: the keys a query sees in layer l, T or the sliding
window; for Llama this is 6·N + 12·L·H·T; 989 TFLOP/s: the H100/H200 dense bf16 datasheet
figure), the peak GPU memory (nvidia-smi memory.used sampled every 0.2 s minus the idle reading
before the side: bench/gpu/memory.py) and the most allocated (torch.cuda.max_memory_allocated;
air: its backend's allocation_stats), the ratios to the seed's side (torch-seed, peft-seed) and
to torch-best, the first step's time (compilation, first touches) and
each side's wall time. A failed side (out of memory, a
crash, a timeout) prints its error's tail and is marked in the table; the others still run.
--json PATH gets everything, rewritten after every side (a run cut short keeps what it had).
air is killed once its metrics.jsonl holds the last step (it has no switch to skip the final
checkpoint: 32 GB of fp32 masters for 8B); --keep-final-save lets it write it.

On the GPU machine (python3 there holds torch; build air with CUDA first; --deadline keeps
the run inside a command's time limit, printing the table and --json before it):
  python3 bench/gpu/bench.py --air build/bin/air --shapes llama-1b --deadline 560 \
      --json $OUT/bench_1b.json
  python3 bench/gpu/bench.py --air build/bin/air --shapes llama-8b --model-init torch \
      --steps 6 --warmup 2 --deadline 560 --json $OUT/bench_8b.json
(--model-init torch: transformers writes air's random bf16 model in seconds; `air model init`
is single-threaded, minutes for 8B parameters. For 8B, air's bf16: true keeps fp32 masters,
gradients and AdamW moments plus a bf16 copy: 134.6 GiB before activations, at the edge of an
H200's 139.8 GiB (it may run, or be refused / run out of memory: the table says which); the
bf16-state variant and both torch sides (bf16 parameters and AdamW state, ~60 GiB) fit.)
GPT-OSS-20B LoRA (issue 31's must-show; 3 to 5 minutes on an H200, of which the model's init
and save the first time, 41.8 GB of bf16 safetensors in --cache, an estimated 40 s to 2.5 min:
the cache needs 43 GB free, else a named error; docs/gpu.md, "Benchmark"):
  python3 bench/gpu/bench.py --air build/bin/air --shapes gpt-oss-20b --steps 6 --warmup 2 \
      --deadline 280 --json $OUT/bench_gpt_oss_20b.json
Smoke mode (no GPU: the plumbing on tiny shapes on the CPU, gloo, air --device cpu):
  $(scripts/venv.sh)/bin/python bench/gpu/bench.py --device cpu --tiny
  $(scripts/venv.sh)/bin/python bench/gpu/bench.py --device cpu --shapes gpt-oss-tiny
"""
import argparse
import datetime
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "fsdp")]
import air_side  # noqa: E402
import common  # noqa: E402  (bench/fsdp/common.py: the machine line, rows, AirRun)
import memory  # noqa: E402
import report  # noqa: E402
import shapes  # noqa: E402
import torch_side  # noqa: E402

# Each side and the shape family it runs on (shapes.family), in the default order.
SIDES = {"torch-seed": "llama", "torch-best": "llama", "air": "llama", "air-bf16": "llama",
         "peft-seed": "gpt_oss", "air-lora": "gpt_oss"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--air", default=os.environ.get("AIR_BIN", common.AIR))
    p.add_argument("--shapes", default="llama-1b",
                   help="comma-separated: " + ",".join(n for n in shapes.SHAPES if n != "tiny"))
    p.add_argument("--sides", help="run in this order (default: every side of each shape's "
                   "family: " + "; ".join(f"{f}: {','.join(s for s in SIDES if SIDES[s] == f)}"
                                           for f in ("llama", "gpt_oss")) + ")")
    p.add_argument("--steps", type=int, default=10, help="timed optimizer steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed optimizer steps first")
    p.add_argument("--cache", default=os.environ.get("AIR_BENCH_CACHE",
                                                     tempfile.gettempdir() + "/air_bench_gpu"),
                   help="model directories, rows and logs (reused between runs)")
    p.add_argument("--json", help="write the results here (after every side)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tiny", action="store_true", help="the tiny shape (smoke mode)")
    p.add_argument("--gpu", type=int, default=_default_gpu(),
                   help="the GPU's index (nvidia-smi -i; CUDA_VISIBLE_DEVICES for each side)")
    p.add_argument("--peak-tflops", type=float, default=989.0,
                   help="the MFU denominator: dense bf16 TFLOP/s (H100/H200 SXM datasheet)")
    p.add_argument("--side-timeout", type=float, default=300.0,
                   help="seconds per side (air: the steps logged by then still count)")
    p.add_argument("--deadline", type=float,
                   help="seconds for the whole run: each side's timeout shrinks to what is "
                        "left and sides that would start with under 30 s are skipped (so the "
                        "table and --json come out before an outer time limit)")
    p.add_argument("--model-init", choices=["air", "torch"],
                   help="air's model: `air model init` (one thread: ~1 min for 1B, several "
                        "for 8B; Llama's default) or transformers' init on the device + "
                        "save_pretrained (GPT-OSS's default: the PEFT side reads it too)")
    p.add_argument("--peft-experts", help="peft-seed: transformers' experts_implementation "
                   "(grouped_mm, eager; its default if absent, as the seed runs)")
    p.add_argument("--best-compile", choices=["layers", "model"], default="layers",
                   help="torch-best: compile each decoder layer, or the whole model")
    p.add_argument("--best-fsdp", action="store_true",
                   help="torch-best under FSDP1 (use_orig_params) instead of a plain model")
    p.add_argument("--best-ac", action="store_true",
                   help="torch-best with activation checkpointing on from the start")
    p.add_argument("--keep-final-save", action="store_true",
                   help="let air write its final checkpoint instead of killing it after the "
                        "last step is logged")
    p.add_argument("--threads", type=int, help="air's --threads (CPU smoke mode)")
    args = p.parse_args()
    args.shape_list = ["tiny"] if args.tiny else args.shapes.split(",")
    for name in args.shape_list:
        if name not in shapes.SHAPES:
            p.error(f"--shapes: unknown shape {name!r}; valid: {', '.join(shapes.SHAPES)}")
    families = {shapes.family(shapes.SHAPES[n]) for n in args.shape_list}
    args.side_list = args.sides.split(",") if args.sides else \
        [s for s in SIDES if SIDES[s] in families]
    for side in args.side_list:
        if side not in SIDES:
            p.error(f"--sides: unknown side {side!r}; valid: {', '.join(SIDES)}")
        if SIDES[side] not in families:
            p.error(f"--sides: {side} runs on {SIDES[side]} shapes and --shapes has none "
                    f"({', '.join(args.shape_list)})")
    if args.steps < 1 or args.warmup < 1:
        p.error("--steps and --warmup must be >= 1 (timing starts after the warm-up)")
    return args


def _default_gpu():
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def torch_probe(device, gpu):
    """torch's version and the device's name from a short child process (so this process
    never holds a CUDA context of its own)."""
    code = ("import json, torch, transformers; d = {'torch': torch.__version__, "
            "'transformers': transformers.__version__, 'cuda': torch.version.cuda}\n"
            "if torch.cuda.is_available(): d['name'] = torch.cuda.get_device_name(0)\n"
            "print(json.dumps(d))")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu) if device == "cuda" else "")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"error": (proc.stdout + proc.stderr)[-500:]}


def header(args):
    rc, out, err = air_side.air_cmd(args.air, "version")
    probe = torch_probe(args.device, args.gpu)
    head = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(shlex.quote(a) for a in sys.argv),
            "air": out.strip() if rc == 0 else f"? ({err.strip()[-200:]})",
            "air_bin": args.air, "torch": probe, "host": common.machine_line(),
            "device": args.device, "peak_tflops": args.peak_tflops}
    if args.device == "cuda":
        info = memory.gpu_info(args.gpu)
        head["gpu"] = {"index": args.gpu, "torch_name": probe.get("name"),
                       "nvidia_smi": info and {"name": info[0], "driver": info[1],
                                               "memory_mib": info[2]}}
    return head


def gpu_name(head):
    """The GPU's name as torch (else nvidia-smi) reports it; None on the CPU."""
    gpu = head.get("gpu")
    if not gpu:
        return None
    return gpu["torch_name"] or (gpu["nvidia_smi"] or {}).get("name") or f"GPU {gpu['index']}"


def shape_sides(args, cfg):
    """The --sides that run on this shape's family, in their order."""
    return [s for s in args.side_list if SIDES[s] == shapes.family(cfg)]


def prepare_shape(args, name, recipe, cache):
    """The config file, the rows and (for the air sides, and the PEFT side that reads the same
    files) the model directory."""
    cfg = shapes.SHAPES[name]
    work = cache / f"{name}"
    work.mkdir(parents=True, exist_ok=True)
    config = work / "config.json"
    config.write_text(json.dumps(cfg, indent=1))
    count = recipe.rows(args.steps + args.warmup)
    rows = cache / f"rows_{recipe.seq}_{cfg['vocab_size']}_{count}.jsonl"
    air_side.write_rows(rows, count, recipe.seq, cfg["vocab_size"])
    model_dir, init = work / "air_model", None
    if any(s.startswith("air") or s == "peft-seed" for s in shape_sides(args, cfg)):
        how = args.model_init or ("torch" if shapes.family(cfg) == "gpt_oss" else "air")
        seconds, reused, error = air_side.init_model(args.air, cfg, model_dir, how,
                                                     args.device, args.gpu)
        init = {"seconds": seconds, "reused": reused, "how": how, "error": error}
        made = "`air model init`" if how == "air" else "transformers (on the device)"
        print(f"air's model ({model_dir}): " + (error if error else
              f"reused (made by {reused})" if reused else f"made by {made} in {seconds:.1f} s"),
              flush=True)
    return cfg, config, rows, model_dir, init


def run_side(side, args, recipe, config, rows, model_dir, work, init, new_sampler, timeout):
    if init and init["error"] and (side.startswith("air") or side == "peft-seed"):
        return {"status": "failed", "error": init["error"]}
    if side.startswith("torch") or side == "peft-seed":
        env = torch_side.worker_env(args.device, args.gpu)
        return torch_side.run_side(side, args, recipe, config, rows, work, args.device,
                                   new_sampler, env, timeout, model_dir)
    sets = ["torch_dtype=bfloat16"] if side == "air-bf16" else []
    return air_side.run_side(args.air, work, model_dir, rows, recipe, args.steps, args.warmup,
                             args.device, sets, new_sampler(),
                             air_side.air_env(args.device, args.gpu), timeout,
                             args.keep_final_save, name=side,
                             threads=args.threads if args.device == "cpu" else None)


def side_timeout(args, start):
    """--side-timeout, shrunk to what --deadline leaves (None: too little left to start)."""
    if args.deadline is None:
        return args.side_timeout
    left = args.deadline - (time.monotonic() - start) - 10
    return min(args.side_timeout, left) if left >= 30 else None


def main():
    start = time.monotonic()
    args = parse_args()
    cache = pathlib.Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    results = {"header": header(args), "steps": args.steps, "warmup": args.warmup,
               "shapes": {}}
    report.print_header(results["header"], args)
    idle = memory.gpu_used_bytes(args.gpu) if args.device == "cuda" else None

    def new_sampler():
        if args.device != "cuda":
            return memory.PeakSampler("cpu")
        return memory.PeakSampler("cuda", args.gpu, memory.wait_for_idle(args.gpu, idle or 0))

    for name in args.shape_list:
        recipe = shapes.RECIPES[name]
        print(shapes.describe(name, cfg=shapes.SHAPES[name]))
        print(f"recipe: {recipe.describe()}; {args.steps} timed steps after {args.warmup}",
              flush=True)
        cfg, config, rows, model_dir, init = prepare_shape(args, name, recipe, cache)
        entry = {"config": cfg, "recipe": vars(recipe), "parameters": shapes.parameter_count(cfg),
                 "active_parameters": shapes.active_parameter_count(cfg),
                 "flops_per_token": shapes.flops_per_token(cfg, recipe.seq),
                 "air_model_init": init, "sides": {}}
        results["shapes"][name] = entry
        for side in shape_sides(args, cfg):
            timeout = side_timeout(args, start)
            if timeout is None:
                result = {"status": "skipped", "error": f"--deadline {args.deadline:g} s: "
                          f"{time.monotonic() - start:.0f} s gone"}
            else:
                print(f"  {side}: running (timeout {timeout:.0f} s)", flush=True)
                result = run_side(side, args, recipe, config, rows, model_dir, config.parent,
                                  init, new_sampler, timeout)
            entry["sides"][side] = result
            report.print_side(side, result)
            report.write_json(args.json, results)
        entry["gpu_name"] = gpu_name(results["header"])
        entry["summary"] = report.print_table(name, cfg, entry, recipe, args)
        report.write_json(args.json, results)
    print(common.machine_line())


if __name__ == "__main__":
    main()
