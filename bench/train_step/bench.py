#!/usr/bin/env python3
"""Training throughput: `air train` vs PyTorch + transformers on the same model, data and CPU,
in fp32 and in bf16, all in one run.

Every side trains the same random-initialized Llama (saved once by transformers, fp32) on the
same micro-batches (pre-tokenized rows, every token a label, in the order air drew them:
`air train --dump-batches`), with the same optimizer (AdamW, weight decay, global-norm clipping
at 1.0), batch and sequence length, and the same number of threads:
  air fp32        `air train` (the native engine's fast CPU path)
  air bf16        `air train` with `bf16: true` (bf16 parameters and activations, bf16 products
                  with fp32 accumulation, fp32 masters and AdamW: docs/engine-training.md)
  pytorch fp32    transformers' LlamaForCausalLM (its default attention), torch.optim.AdamW and
                  clip_grad_norm_
  pytorch bf16    the same under torch.autocast("cpu", dtype=torch.bfloat16) (fp32 weights,
                  bf16 matmuls: PyTorch's bf16 path on a CPU; oneDNN's bf16 GEMM underneath)
air's tokens/s come from its metrics.jsonl between the warm-up and the last step (loading and
saving excluded); PyTorch's are timed over the same steps after the same warm-up. It prints every
side's tokens/s and first/last loss, the ratios air bf16 / air fp32 and air / PyTorch's best
(the faster of its fp32 and bf16; with --rounds N every side runs N times, interleaved, the
dtypes' order reversed every other round so that a drifting machine favours neither, and each
figure is its median, each ratio printed per round too), the training FLOP/s each side
reaches (6 x matmul parameters + attention, per token), the host's steal time during each
side's run (on a virtual machine: the share of the CPUs' time the host gave other guests, the
usual cause of a slow round) and the CPU's model and flags.
--gemm-peak GFLOPS (the machine's measured vdpbf16ps peak: the first line of
`bench/gemm/bench.py --table bf16`) adds the fraction of it air bf16 reaches.

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/train_step/bench.py \
      [--layers 4 --hidden 512 --vocab 4096 --seq 256 --batch 4 --steps 12 --warmup 2
       --threads 2] [--dtype both|fp32|bf16] [--gemm-peak GFLOPS] [--rounds N]
  (the 56M vocab-32k shape: --layers 8 --hidden 512 --vocab 32000)
--threads 1,2,4 sweeps thread counts: every side at every count (the same count for air's
`--threads` and PyTorch's torch.set_num_threads), interleaved within each round, and prints a
table of tokens/s per count with each side's parallel efficiency against the smallest count
(speedup / thread ratio: 100% is linear). A count above the CPUs the process may use is marked
oversubscribed: those rows show how the work balances, not a speedup.
--isa avx2 measures both sides as an AVX2-only CPU runs them: air's AVX2 kernels
(AIR_CPU_KERNELS=avx2) and PyTorch's (ATEN_CPU_CAPABILITY=avx2, oneDNN and MKL, its fp32
GEMM, capped by ONEDNN_MAX_CPU_ISA / MKL_ENABLE_INSTRUCTIONS=AVX2: no AVX-512, no bf16 dot
products), both printed.
"""
import argparse
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


def build_model(args, model_dir):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    heads = max(1, args.hidden // 64)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                         intermediate_size=args.hidden * 8 // 3 // 64 * 64 or 64,
                         num_hidden_layers=args.layers, num_attention_heads=heads,
                         num_key_value_heads=max(1, heads // 2),
                         max_position_embeddings=max(512, args.seq), tie_word_embeddings=False,
                         bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config).float()
    model.save_pretrained(model_dir, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def write_rows(args, path):
    import random
    rng = random.Random(0)
    rows = args.batch * (args.steps + args.warmup)
    with open(path, "w") as f:
        for _ in range(rows):
            ids = [rng.randrange(3, args.vocab) for _ in range(args.seq)]
            f.write(json.dumps({"input_ids": ids}) + "\n")
    return rows



def train_flops_per_token(args):
    """6 x the matmul parameters (forward 2, backward 4) + causal attention's products."""
    heads = max(1, args.hidden // 64)
    kv = max(1, heads // 2) * 64
    inter = args.hidden * 8 // 3 // 64 * 64 or 64
    per_layer = args.hidden * (args.hidden * 2 + kv * 2) + 3 * args.hidden * inter
    matmul = args.layers * per_layer + args.vocab * args.hidden
    attention = args.layers * 2 * 2 * (args.seq / 2) * args.hidden  # QK^T and PV, causal half
    return 3 * (2 * matmul + attention)


def run_air(args, air, model_dir, data, work, bf16):
    out = work / f"air_out_{bf16}"
    cfg = work / f"train_{bf16}.yaml"
    cfg.write_text(
        f"model_name: {model_dir}\ndataset_name: {data}\noutput_dir: {out}\n"
        f"max_seq_len: {args.seq}\nper_device_batch_size: {args.batch}\n"
        f"gradient_accumulation_steps: 1\nlearning_rate: {args.lr}\n"
        f"max_steps: {args.steps + args.warmup}\nlr_scheduler_type: constant\n"
        "weight_decay: 0.01\nmax_grad_norm: 1.0\nlogging_steps: 1\nsave_steps: 0\n"
        f"seed: 0\nbf16: {str(bf16).lower()}\nactivation_checkpointing: false\n")
    proc = subprocess.run([air, "train", "--config", str(cfg), "--threads", str(args.threads),
                           "--dump-batches", str(work / "batches.jsonl")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"air train failed:\n{proc.stdout}\n{proc.stderr}")
    compute = next((l for l in proc.stdout.splitlines() if l.startswith("compute")), "")
    print(f"air {compute}")
    metrics = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "loss" in m and "step" in m]
    first, last = steps[args.warmup - 1], steps[-1]
    tokens = last["tokens"] - first["tokens"]
    seconds = last["elapsed_s"] - first["elapsed_s"]
    return tokens / seconds, steps[0]["loss"], last["loss"]


def run_pytorch(args, model_dir, batches_file, bf16):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # hf_load_kwargs: extra from_pretrained arguments (bench/gpt_oss: the experts implementation)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 **getattr(args, "hf_load_kwargs", {}))
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
    batches = [json.loads(l) for l in open(batches_file)]  # air's own, in its order
    losses, start, tokens = [], None, 0
    for step in range(args.steps + args.warmup):
        if step == args.warmup:
            start, tokens = time.perf_counter(), 0
        ids = torch.tensor(batches[step]["input_ids"])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=torch.tensor(batches[step]["labels"])).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        tokens += ids.numel()
    return tokens / (time.perf_counter() - start), losses[0], losses[-1]


def thread_counts(text):
    """'1,2,4' -> [1, 2, 4] (argparse type for --threads)."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"--threads {text!r}: a thread count or a comma-separated list of them, each >= 1 "
            "(e.g. 2 or 1,2,4)")
    return sorted(set(counts))


def usable_cpus():
    """The CPUs this process may run on (its affinity mask), as air's thread pool counts them."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_round(args, air, model_dir, data, work, dtypes):
    """Every side once at args.threads, the dtypes in the given order: ({(side, bf16):
    (tokens/s, first, last)}, steal %)."""
    one, steal = {}, {}  # steal: the host's steal time during each side's run, %
    for bf16 in dtypes:  # air writes the batches both PyTorch sides replay
        before = cpu_info.cpu_times()
        one[("air", bf16)] = run_air(args, air, model_dir, data, work, bf16)
        steal[("air", bf16)] = cpu_info.steal_percent(before, cpu_info.cpu_times())
    for bf16 in dtypes:
        before = cpu_info.cpu_times()
        one[("pytorch", bf16)] = run_pytorch(args, model_dir, work / "batches.jsonl", bf16)
        steal[("pytorch", bf16)] = cpu_info.steal_percent(before, cpu_info.cpu_times())
    return one, steal


def report(args, rounds, steals, dtypes):
    """Prints one thread count's figures; returns each side's median tokens/s."""
    results = {}
    # Each side's median tokens/s over the rounds; the losses are the first round's (every
    # round trains the same steps).
    for key in rounds[0]:
        results[key] = (statistics.median(r[key][0] for r in rounds),) + rounds[0][key][1:]
    flops = train_flops_per_token(args)
    print(f"{args.threads} threads:")
    print(f"{'':14} {'tokens/s':>10} {'GFLOP/s':>8} {'first loss':>11} {'last loss':>10}")
    for (side, bf16), (tps, first, last) in results.items():
        name = f"{side} {'bf16' if bf16 else 'fp32'}"
        print(f"{name:14} {tps:10.0f} {tps * flops / 1e9:8.1f} {first:11.4f} {last:10.4f}")
    torch_best = max(results[("pytorch", b)][0] for b in dtypes)
    for bf16 in dtypes:
        of = " (of the sides' medians)" if args.rounds > 1 else ""
        print(f"ratio air {'bf16' if bf16 else 'fp32'} / PyTorch's best{of}: "
              f"{results[('air', bf16)][0] / torch_best:.2f}x")
        if args.rounds > 1:
            air_tps = [r[("air", bf16)][0] for r in rounds]
            best = [max(r[("pytorch", b)][0] for b in dtypes) for r in rounds]
            each = [a / t for a, t in zip(air_tps, best)]
            # Each round's sides ran back to back: a slow phase of a shared host slows both,
            # so the median of these is the steadier figure.
            print(f"  per round: {' '.join(f'{x:.2f}x' for x in each)} (median "
                  f"{statistics.median(each):.2f}x; air {' '.join(f'{a:.0f}' for a in air_tps)}"
                  f" vs PyTorch's best {' '.join(f'{t:.0f}' for t in best)} tokens/s)")
    # A virtual machine's host may run other guests on its CPUs: the time it took from each
    # side's run (whole runs, start-up included), the noise behind a slow round.
    print("host steal time during each side's run, per round: " + "; ".join(
        f"{side} {'bf16' if bf16 else 'fp32'} "
        + " ".join(f"{s[(side, bf16)]:.0f}%" for s in steals) for side, bf16 in rounds[0]))
    if len(dtypes) == 2:
        print(f"ratio air bf16 / air fp32: "
              f"{results[('air', True)][0] / results[('air', False)][0]:.2f}x; "
              f"PyTorch bf16 autocast / fp32: "
              f"{results[('pytorch', True)][0] / results[('pytorch', False)][0]:.2f}x")
    if args.gemm_peak > 0 and True in dtypes:
        reached = results[("air", True)][0] * flops / 1e9
        print(f"air bf16 reaches {reached:.0f} GFLOP/s of training work: "
              f"{100 * reached / args.gemm_peak:.0f}% of the measured bf16 GEMM peak "
              f"({args.gemm_peak:.0f} GFLOP/s)")
    return {key: value[0] for key, value in results.items()}


def report_sweep(medians, dtypes, cpus):
    """The --threads sweep: tokens/s per count, air bf16 (else fp32) over PyTorch's best, and
    each side's parallel efficiency against the smallest count: (tps_T / tps_T0) / (T / T0)."""
    counts = sorted(medians)
    sides = [(side, bf16) for side in ("air", "pytorch") for bf16 in dtypes]
    names = [f"{side} {'bf16' if bf16 else 'fp32'}" for side, bf16 in sides]
    base = counts[0]
    print(f"thread sweep (tokens/s, medians; efficiency against {base} thread"
          f"{'' if base == 1 else 's'}; {cpus} usable CPUs):")
    headline = ("air", dtypes[-1])
    header = (["threads"] + names + [f"{names[sides.index(headline)]} / PyTorch's best"]
              + [f"eff. {n}" for n in names])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for t in counts:
        row = medians[t]
        best = max(row[("pytorch", b)] for b in dtypes)
        cells = [f"{t}{' (oversubscribed)' if t > cpus else ''}"]
        cells += [f"{row[s]:,.0f}" for s in sides]
        cells.append(f"{row[headline] / best:.2f}x")
        cells += [f"{100 * (row[s] / medians[base][s]) / (t / base):.0f}%" for s in sides]
        print("| " + " | ".join(cells) + " |")
    if counts[-1] > cpus:
        print(f"  counts above {cpus} run more threads than CPUs: they measure how evenly the "
              "work is split and how the threads wait, not how the step scales")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--threads", type=thread_counts, default=[os.cpu_count()],
                        help="threads for both sides, or a comma-separated sweep (1,2,4)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--dtype", choices=["both", "fp32", "bf16"], default="both")
    parser.add_argument("--isa", choices=list(cpu_info.ISA_CAPS), default="native",
                        help="avx2: both sides capped at AVX2 (a CPU without AVX-512)")
    parser.add_argument("--gemm-peak", type=float, default=0.0,
                        help="the machine's measured bf16 GEMM peak in GFLOP/s")
    parser.add_argument("--rounds", type=int, default=1,
                        help="every side this many times, interleaved; medians and per-round "
                             "ratios (a shared host's slow phases then hit every side)")
    args = parser.parse_args()
    if args.warmup < 1 or args.steps < 1:
        parser.error("--warmup and --steps must be >= 1 (timing starts after the warm-up steps)")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    cpu_info.cap_isa(args.isa)  # before torch is imported
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    dtypes = {"both": [False, True], "fp32": [False], "bf16": [True]}[args.dtype]
    counts, cpus = args.threads, usable_cpus()
    # One namespace per thread count: the runners (shared with bench/gpt_oss) read args.threads.
    per_count = {t: argparse.Namespace(**{**vars(args), "threads": t}) for t in counts}
    print(cpu_info.describe())
    with tempfile.TemporaryDirectory(prefix="air_bench_train_") as tmp:
        work = pathlib.Path(tmp)
        model_dir, data = work / "model", work / "rows.jsonl"
        params = build_model(args, model_dir)
        import torch
        print(cpu_info.describe_isa(torch))
        write_rows(args, data)
        print(f"model: Llama {args.layers} layers, hidden {args.hidden}, vocab {args.vocab}, "
              f"{params / 1e6:.2f} M parameters; batch {args.batch} x {args.seq} tokens; "
              f"{args.steps} timed steps after {args.warmup}; "
              f"{', '.join(map(str, counts))} threads ({cpus} usable CPUs)")
        rounds = {t: [] for t in counts}
        steals = {t: [] for t in counts}
        for index in range(args.rounds):  # every count in every round: load changes hit them all
            order = dtypes if index % 2 == 0 else dtypes[::-1]
            for t in counts:
                one, steal = run_round(per_count[t], air, model_dir, data, work, order)
                rounds[t].append(one)
                steals[t].append(steal)
    medians = {t: report(per_count[t], rounds[t], steals[t], dtypes) for t in counts}
    if len(counts) > 1:
        report_sweep(medians, dtypes, cpus)
    print(cpu_info.describe())


if __name__ == "__main__":
    main()
