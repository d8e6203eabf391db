#!/usr/bin/env python3
"""LoRA training throughput and memory: `air train` with use_peft vs PEFT + transformers on the
same model, batches and threads, in one run.

Both sides train the same random-initialized Llama (saved once by transformers, fp32) with the
same LoRA (the second seed's LoraConfig by default: r 16, alpha 16, all-linear; dropout 0.05),
the same micro-batches (pre-tokenized rows, every token a label, in the order air drew them:
`air train --dump-batches`), the same optimizer (AdamW over the adapters, global-norm clipping at
1.0) and the same number of threads, each in its own process:
  air    `air train` with use_peft (frozen base in param_dtype, adapters in fp32, the frozen
         weights' gradient GEMMs skipped)
  peft   peft.get_peft_model over transformers' model (AutoModelForCausalLM, its default attention),
         torch.optim.AdamW over the trainable parameters, clip_grad_norm_
--bf16 runs both with a bf16 base: air's `bf16: true`, PEFT's base loaded in bfloat16 with its
adapters kept in fp32 (autocast_adapter_dtype, PEFT's default) under torch.autocast bf16.

air's tokens/s come from its metrics.jsonl between the warm-up and the last step (loading and
saving excluded); PEFT's are timed over the same steps after the same warm-up. Memory, per side
(one rank each): the peak resident set of its process (wait4's ru_maxrss) and its training state
(air: the frozen base, trained parameters, gradients and AdamW moments it reports; PEFT: the same
four measured on its tensors). Prints the ratio air / PEFT of both, and the CPU's model and flags.
--rounds N runs both sides N times, interleaved (air, PEFT, air, PEFT, ...: a slow stretch of the
host hits both), and prints each side's median tokens/s, their ratio, and the ratio of each round
with its median (the losses, memory and state are the first round's: every round trains the same
steps on the same batches). --isa avx2 caps both sides at AVX2 (bench/cpu_info.py's cap_isa, as
bench/train_step's): a CPU without AVX-512.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/lora/bench.py \\
      [--layers 4 --hidden 512 --vocab 4096 --seq 256 --batch 4 --steps 8 --warmup 2
       --threads 2] [--bf16] [--r 16 --alpha 16 --dropout 0.05] [--rounds 3] [--isa avx2]
"""
import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import cpu_info  # noqa: E402  (bench/cpu_info.py: the machine line)

# The model and rows of bench/train_step (one definition of each).
_spec = importlib.util.spec_from_file_location("train_step_bench",
                                               REPO / "bench" / "train_step" / "bench.py")
_train_step = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_train_step)
build_model, write_rows = _train_step.build_model, _train_step.write_rows

MIB = 1024.0 * 1024.0


def run_measured(argv):
    """Runs argv; returns (returncode, stdout, stderr, peak RSS in MiB of that process)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(), err.read().decode(),
                usage.ru_maxrss / 1024.0)


def run_air(args, air, model_dir, data, work):
    """air's side; its batches go to work/batches.jsonl for the PEFT side."""
    out = work / "air_out"
    cfg = work / "train.yaml"
    cfg.write_text(
        f"model_name: {model_dir}\ndataset_name: {data}\noutput_dir: {out}\n"
        f"max_seq_len: {args.seq}\nper_device_batch_size: {args.batch}\n"
        f"gradient_accumulation_steps: 1\nlearning_rate: {args.lr}\n"
        f"max_steps: {args.steps + args.warmup}\nlr_scheduler_type: constant\n"
        "weight_decay: 0.01\nmax_grad_norm: 1.0\nlogging_steps: 1\nsave_steps: 0\n"
        f"seed: 0\nbf16: {str(args.bf16).lower()}\nactivation_checkpointing: false\n"
        f"use_peft: true\nlora_r: {args.r}\nlora_alpha: {args.alpha}\n"
        f"lora_dropout: {args.dropout}\nlora_target_modules: all-linear\n")
    code, stdout, stderr, rss = run_measured(
        [air, "-o", "json", "train", "--config", str(cfg), "--threads", str(args.threads),
         "--dump-batches", str(work / "batches.jsonl")])
    if code != 0:
        sys.exit(f"air train failed:\n{stdout}\n{stderr}")
    data = json.loads(stdout)["data"]
    if not getattr(args, "quiet_round", False):  # --rounds: said once
        print(f"air lora: {data.get('lora', '')}")
    metrics = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "loss" in m and "step" in m]
    first, last = steps[args.warmup - 1], steps[-1]
    tokens = last["tokens"] - first["tokens"]
    seconds = last["elapsed_s"] - first["elapsed_s"]
    m = data["memory"]
    state = {"frozen base": m["frozen_bytes"], "trained parameters": m["parameter_bytes"],
             "gradients": m["gradient_bytes"], "optimizer": m["optimizer_bytes"]}
    return {"tokens_per_s": tokens / seconds, "first_loss": steps[0]["loss"],
            "last_loss": last["loss"], "rss_mib": rss, "state": state}


def peft_worker(args):
    """The PEFT side, in its own process (for its own peak RSS); prints one JSON line."""
    import torch
    import peft
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    # --hf-experts: a MoE model's experts implementation (bench/gpt_oss's LoRA side)
    extra = {"experts_implementation": args.hf_experts} if args.hf_experts else {}
    base = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=dtype, **extra)
    model = peft.get_peft_model(base, peft.LoraConfig(
        r=args.r, lora_alpha=args.alpha, lora_dropout=args.dropout, target_modules="all-linear",
        task_type="CAUSAL_LM"))
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        [{"params": [p for p in trainable if p.dim() >= 2], "weight_decay": 0.01},
         {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0}], lr=args.lr)
    batches = [json.loads(l) for l in open(args.batches)]  # air's own, in its order
    def nbytes(ts):
        return sum(t.numel() * t.element_size() for t in ts)

    losses, start, tokens, state = [], None, 0, {}
    for step in range(args.steps + args.warmup):
        if step == args.warmup:
            start, tokens = time.perf_counter(), 0
        ids = torch.tensor(batches[step]["input_ids"])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(input_ids=ids, labels=torch.tensor(batches[step]["labels"])).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        if step == args.steps + args.warmup - 1:  # the training state at its largest
            frozen = [p for p in model.parameters() if not p.requires_grad]
            moments = [v for s in opt.state.values() for v in s.values()
                       if torch.is_tensor(v) and v.dim() > 0]
            state = {"frozen base": nbytes(frozen), "trained parameters": nbytes(trainable),
                     "gradients": nbytes([p.grad for p in trainable if p.grad is not None]),
                     "optimizer": nbytes(moments)}
        opt.zero_grad()
        losses.append(loss.item())
        tokens += ids.numel()
    tps = tokens / (time.perf_counter() - start)
    print(json.dumps({"tokens_per_s": tps, "first_loss": losses[0], "last_loss": losses[-1],
                      "state": state}))


def run_peft(args, model_dir, batches, hf_experts=""):
    argv = [sys.executable, __file__, "--peft-worker", "--model-dir", str(model_dir),
            "--batches", str(batches), "--hf-experts", hf_experts]
    for key in ("steps", "warmup", "threads", "lr", "r", "alpha", "dropout"):
        argv += [f"--{key}", str(getattr(args, key))]
    if args.bf16:
        argv.append("--bf16")
    code, stdout, stderr, rss = run_measured(argv)
    if code != 0:
        sys.exit(f"the PEFT side failed:\n{stdout}\n{stderr}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["rss_mib"] = rss
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=8, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--r", type=int, default=16)
    parser.add_argument("--alpha", type=float, default=16)
    parser.add_argument("--dropout", type=float, default=0.05)
    parser.add_argument("--bf16", action="store_true", help="a bf16 base on both sides")
    parser.add_argument("--isa", choices=list(cpu_info.ISA_CAPS), default="native",
                        help="avx2: both sides capped at AVX2 (a CPU without AVX-512)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="both sides this many times, interleaved; medians and per-round "
                        "ratios")
    parser.add_argument("--peft-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--batches", help=argparse.SUPPRESS)
    parser.add_argument("--hf-experts", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peft_worker:
        return peft_worker(args)
    if args.warmup < 1 or args.steps < 1:
        parser.error("--warmup and --steps must be >= 1 (timing starts after the warm-up steps)")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    cpu_info.cap_isa(args.isa)  # before torch is imported (the PEFT worker inherits it)
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    print(cpu_info.describe())
    if args.isa != "native":
        import torch
        print(cpu_info.describe_isa(torch))
    with tempfile.TemporaryDirectory(prefix="air_bench_lora_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data = work / "model", work / "rows.jsonl"
        params = build_model(args, model_dir)
        write_rows(args, data)
        print(f"model: Llama {args.layers} layers, hidden {args.hidden}, vocab {args.vocab}, "
              f"{params / 1e6:.2f} M parameters; LoRA r {args.r}, alpha {args.alpha:g}, "
              f"all-linear, dropout {args.dropout:g}; {'bf16' if args.bf16 else 'fp32'} base; "
              f"batch {args.batch} x {args.seq} tokens; {args.steps} timed steps after "
              f"{args.warmup}; {args.threads} threads")
        rounds = []
        for index in range(args.rounds):
            args.quiet_round = index > 0
            rounds.append({"air": run_air(args, air, model_dir, data, work),
                           "peft": run_peft(args, model_dir, work / "batches.jsonl")})
    # Every round trains the same steps on the same batches: the losses, memory and state are the
    # first round's, the tokens/s each side's median.
    results = {side: dict(first, tokens_per_s=statistics.median(
        r[side]["tokens_per_s"] for r in rounds)) for side, first in rounds[0].items()}
    keys = list(results["air"]["state"])
    print(f"{'':6} {'tokens/s':>9} {'first loss':>11} {'last loss':>10} {'peak RSS':>10}  "
          + "  ".join(f"{k} (MiB)" for k in keys))
    for side, r in results.items():
        print(f"{side:6} {r['tokens_per_s']:9.0f} {r['first_loss']:11.4f} {r['last_loss']:10.4f} "
              f"{r['rss_mib']:8.0f} M  "
              + "  ".join(f"{r['state'][k] / MIB:{len(k) + 6}.1f}" for k in keys))
    air_r, peft_r = results["air"], results["peft"]
    of = " (of the sides' medians)" if args.rounds > 1 else ""
    print(f"ratio air / PEFT + transformers: tokens/s {air_r['tokens_per_s'] / peft_r['tokens_per_s']:.2f}x{of}; "
          f"peak RSS {air_r['rss_mib'] / peft_r['rss_mib']:.2f}x; training state "
          f"{sum(air_r['state'].values()) / sum(peft_r['state'].values()):.2f}x")
    if args.rounds > 1:
        each = [r["air"]["tokens_per_s"] / r["peft"]["tokens_per_s"] for r in rounds]
        tps = {side: " ".join(f"{r[side]['tokens_per_s']:.0f}" for r in rounds)
               for side in ("air", "peft")}
        print(f"  per round: {' '.join(f'{x:.2f}x' for x in each)} (median "
              f"{statistics.median(each):.2f}x; air {tps['air']} vs PEFT {tps['peft']} tokens/s)")
    print(cpu_info.describe())


if __name__ == "__main__":
    main()
