#!/usr/bin/env python3
"""GEMM throughput: the engine's fast CPU matrix multiplies vs torch.mm, same shapes and threads.

Two tables, one run, the CPU's model and flags and the load average printed first:

fp32  The products of one training step of a small Llama (1024 tokens, hidden 256, MLP 640,
      vocab 4096): the forward X W^T, the input gradient dY W, the weight gradient dY^T X,
      the LM head, plus a square 2048 product, and LoRA r 16's fp32 products on hidden 512
      (the narrow GEMM, gemm_narrow.h). air: FastOps::Gemm; PyTorch: torch.mm on fp32.
bf16  The products of one training step of bench/train_step's 4 x 512 Llama (1024 tokens =
      batch 4 x seq 256, hidden 512, 8 heads of 64 with 4 KV heads, MLP 1344) with the 56M
      model's 32k vocabulary (the LM head whole and a 256-row chunk, as a chunked
      linear + cross-entropy runs it), in the trainer's dtypes: A and B bf16; the forward
      and the input gradients write a bf16 C, the weight gradients accumulate into an fp32 C
      (beta 1). Columns: air's bf16 GEMM on the path gemm_path.h chooses for this CPU (named
      in the output; AIR_CPU_PATH forces one), oneDNN's bf16 matmul (the engine's onednn path:
      Debian's libdnnl 2.6, src/engine/backend/cpu/onednn_gemm.h), torch.mm on
      bf16 tensors (PyTorch's own oneDNN 3.x; its C is bf16 always, no beta), air's fp32
      FastGemm and torch.mm on fp32 on the same shapes; the ratios air bf16 / torch bf16,
      air bf16 / air fp32 and air bf16 / oneDNN; each GEMM as a fraction of the machine's
      peak, measured by register-only loops (vdpbf16ps for bf16, fp32 FMA). Then every path
      this CPU runs (onednn, avx512bf16, the conversion path) side by side and the fastest,
      and LoRA r 16's products in a bf16 step (mixed dtypes: bf16 activations, fp32 adapters)
      on FastOps::Gemm's route against torch.mm bf16 and fp32.
Every figure is the best of three 0.25 s windows after a warm-up (other load only slows a
window down), on the same thread count for every side; on a machine that other work keeps
busy, `--threads 1 --clock cpu` times the windows in the measuring thread's CPU time instead
(every side runs in the calling thread then), which time slicing does not inflate.

  $(scripts/venv.sh)/bin/python bench/gemm/bench.py [--threads 2] [--table fp32|bf16|both]
      [--clock wall|cpu]
  AIR_CPU_KERNELS=avx512|avx2|generic ... caps air's kernels (the bf16 conversion paths).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import cpu_info  # noqa: E402  (bench/cpu_info.py: the machine line)

FP32_SHAPES = [  # (what, m, n, k, trans_a, trans_b)
    ("X W^T (MLP up)", 1024, 640, 256, 0, 1),
    ("X W^T (MLP down)", 1024, 256, 640, 0, 1),
    ("LM head", 1024, 4096, 256, 0, 1),
    ("dY W (input grad)", 1024, 256, 640, 0, 0),
    ("dY^T X (weight grad)", 640, 256, 1024, 1, 0),
    ("square 2048", 2048, 2048, 2048, 0, 0),
    # LoRA r 16's fp32 products (gemm_narrow.h): du = dY B, dB = dY^T U, T = dU A, dA = dU^T X
    ("LoRA dY B (N 16)", 1024, 16, 512, 0, 0),
    ("LoRA dY^T U (N 16)", 512, 16, 1024, 1, 0),
    ("LoRA dU A (K 16)", 1024, 512, 16, 0, 0),
    ("LoRA dU^T X (M 16)", 16, 512, 1024, 1, 0),
]
T, H, KV, F, V, CHUNK = 1024, 512, 256, 1344, 32000, 256
BF16_SHAPES = [  # (what, m, n, k, trans_a, trans_b, C dtype, beta)
    ("X W^T q, o proj", T, H, H, 0, 1, "bf16", 0),
    ("X W^T k, v proj", T, KV, H, 0, 1, "bf16", 0),
    ("X W^T MLP gate/up", T, F, H, 0, 1, "bf16", 0),
    ("X W^T MLP down", T, H, F, 0, 1, "bf16", 0),
    ("X W^T LM head", T, V, H, 0, 1, "bf16", 0),
    ("X W^T LM head chunk", CHUNK, V, H, 0, 1, "bf16", 0),
    ("dY W MLP down", T, F, H, 0, 0, "bf16", 0),
    ("dY W MLP gate/up", T, H, F, 0, 0, "bf16", 0),
    ("dY W LM head chunk", CHUNK, H, V, 0, 0, "bf16", 0),
    ("dY^T X MLP gate/up", F, H, T, 1, 0, "f32", 1),
    ("dY^T X MLP down", H, F, T, 1, 0, "f32", 1),
    ("dY^T X LM head chunk", V, H, CHUNK, 1, 0, "f32", 1),
]
# LoRA r 16's products in a bf16 step on bench/lora's hidden 512 (one adapter; u = scaling x A^T
# kept F32, du F32, the adapters fp32): (what, m, n, k, trans_a, trans_b, C, beta, A, B).
LORA_BF16_SHAPES = [
    ("x A^T (N 16)", T, 16, H, 0, 1, "f32", 0, "bf16", "f32"),
    ("y += u B^T (K 16)", T, H, 16, 0, 1, "bf16", 1, "f32", "f32"),
    ("dy^T u (N 16)", H, 16, T, 1, 0, "f32", 1, "bf16", "f32"),
    ("dy B (N 16)", T, 16, H, 0, 0, "f32", 0, "bf16", "f32"),
    ("du^T xd (M 16)", 16, H, T, 1, 0, "f32", 1, "f32", "bf16"),
    ("du A (K 16)", T, H, 16, 0, 0, "f32", 0, "f32", "f32"),
]
CLOCK = {"wall": time.perf_counter, "cpu": time.thread_time}


def best_gflops(flops, run, clock):
    run()
    best = 0.0
    for _ in range(3):
        reps, start = 0, clock()
        while clock() - start < 0.25:
            run()
            reps += 1
        best = max(best, flops * reps / (clock() - start) / 1e9)
    return best


def torch_gflops(m, n, k, ta, tb, dtype, clock):
    import torch
    a = (torch.randn(k, m) if ta else torch.randn(m, k)).to(dtype)
    b = (torch.randn(n, k) if tb else torch.randn(k, n)).to(dtype)
    lhs, rhs = (a.t() if ta else a), (b.t() if tb else b)
    return best_gflops(2 * m * n * k, lambda: torch.mm(lhs, rhs), CLOCK[clock])


def air_tool(clock, *args):
    tool = os.environ.get("AIR_GEMM_BENCH", str(REPO / "build/bin/air_gemm_bench"))
    flags = ["--cpu-clock"] if clock == "cpu" else []
    proc = subprocess.run([tool, *flags, *map(str, args)], capture_output=True, text=True,
                          check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def fp32_table(threads, clock):
    import torch
    air = air_tool(clock, threads,
                   *(f"{m},{n},{k},{ta},{tb}" for _, m, n, k, ta, tb in FP32_SHAPES))
    print(f"\nfp32: air FastOps::Gemm ({air[0]['kernels']} kernels) vs torch.mm fp32")
    print(f"{'product':22} {'m':>5} {'n':>5} {'k':>5}  {'air GFLOP/s':>11} {'torch':>8} {'ratio':>6}")
    for (what, m, n, k, ta, tb), result in zip(FP32_SHAPES, air):
        ref = torch_gflops(m, n, k, ta, tb, torch.float32, clock)
        print(f"{what:22} {m:5} {n:5} {k:5}  {result['gflops']:11.1f} {ref:8.1f} "
              f"{result['gflops'] / ref:5.2f}x")


def bf16_table(threads, clock):
    import torch
    peak = air_tool(clock, "--peak", threads)[0]
    print(f"\nbf16: peaks on {threads} threads (register-only loops): vdpbf16ps "
          f"{peak['bf16']:.0f} GFLOP/s, fp32 FMA {peak['f32']:.0f} GFLOP/s")
    shapes = [f"{m},{n},{k},{ta},{tb},{c},{beta}"
              for _, m, n, k, ta, tb, c, beta in BF16_SHAPES]
    air = air_tool(clock, "--bf16", threads, *shapes)
    print(f"air bf16 GEMM path that ran: {air[0]['path']} ({air[0]['reason']}); "
          f"oneDNN implementation: {air[0]['onednn_impl']}")
    print(f"{'product (GFLOP/s)':22} {'m':>5} {'n':>5} {'k':>5} {'C':>4}  {'air':>6} "
          f"{'oneDNN':>6} {'torch':>6} {'air32':>6} {'tch32':>6}  {'air/tch':>7} "
          f"{'air/a32':>7} {'air/dnn':>7}  {'air%pk':>6} {'tch%pk':>6} {'a32%pk':>6}")
    ratios = []
    for (what, m, n, k, ta, tb, c, _), r in zip(BF16_SHAPES, air):
        if r["onednn"] is None:  # no bf16 matmul in oneDNN at this ISA (air_gemm_bench says why)
            r["onednn"] = float("nan")
        tb16 = torch_gflops(m, n, k, ta, tb, torch.bfloat16, clock)
        t32 = torch_gflops(m, n, k, ta, tb, torch.float32, clock)
        ratios.append((r["air"] / tb16, r["air"] / r["air_f32"], r["air"] / r["onednn"]))
        # The peak of the unit air's path runs on: the fp32 FMA where bf16 is widened on load.
        bf16_peak = (peak["bf16"] if r["path"] in ("avx512bf16", "onednn") else peak["f32"]) \
            or float("nan")
        print(f"{what:22} {m:5} {n:5} {k:5} {c:>4}  {r['air']:6.1f} {r['onednn']:6.1f} "
              f"{tb16:6.1f} {r['air_f32']:6.1f} {t32:6.1f}  {ratios[-1][0]:6.2f}x "
              f"{ratios[-1][1]:6.2f}x {ratios[-1][2]:6.2f}x  {r['air'] / bf16_peak:6.0%} "
              f"{tb16 / bf16_peak:6.0%} {r['air_f32'] / peak['f32']:6.0%}")
    names = list(air[0]["paths"])
    print(f"\nair's bf16 GEMM on each path this CPU runs (GFLOP/s, windows interleaved; "
          f"chosen: {air[0]['path']}):")
    print(f"{'product':22} " + " ".join(f"{n:>10}" for n in names) + f" {'air fp32':>10}  fastest")
    for (what, *_), r in zip(BF16_SHAPES, air):
        fastest = max(names, key=lambda n: r["paths"][n])
        print(f"{what:22} " + " ".join(f"{r['paths'][n]:10.1f}" for n in names) +
              f" {r['air_f32']:10.1f}  {fastest}")
    lora_rows(threads, clock)
    lo = [min((x[i] for x in ratios), key=lambda v: (v != v, v)) for i in range(3)]
    hi = [max((x[i] for x in ratios), key=lambda v: (v == v, v)) for i in range(3)]
    print(f"ranges: air bf16 / torch bf16 {lo[0]:.2f}-{hi[0]:.2f}x, air bf16 / air fp32 "
          f"{lo[1]:.2f}-{hi[1]:.2f}x, air bf16 / oneDNN {lo[2]:.2f}-{hi[2]:.2f}x")


def lora_rows(threads, clock):
    """LoRA's rank-16 products in the trainer's dtypes, on FastOps::Gemm's route (the narrow GEMM
    of gemm_narrow.h on the conversion path, the avx512bf16 path's narrow tile on Zen) against
    torch.mm on bf16 (PEFT under autocast casts its fp32 adapters to bf16) and on fp32."""
    import torch
    shapes = [f"{m},{n},{k},{ta},{tb},{c},{beta},{a},{b}"
              for _, m, n, k, ta, tb, c, beta, a, b in LORA_BF16_SHAPES]
    air = air_tool(clock, "--bf16", threads, *shapes)
    print(f"\nLoRA r 16's products in a bf16 step (GFLOP/s; air: FastOps::Gemm's route on "
          f"{air[0]['path']}):")
    print(f"{'product':22} {'m':>5} {'n':>5} {'k':>5} {'C':>4} {'A':>4} {'B':>4}  {'air':>6} "
          f"{'torch':>6} {'tch32':>6}  {'air/tch':>7} {'air/t32':>7}")
    for (what, m, n, k, ta, tb, c, _, a, b), r in zip(LORA_BF16_SHAPES, air):
        tb16 = torch_gflops(m, n, k, ta, tb, torch.bfloat16, clock)
        t32 = torch_gflops(m, n, k, ta, tb, torch.float32, clock)
        print(f"{what:22} {m:5} {n:5} {k:5} {c:>4} {a:>4} {b:>4}  {r['fastops']:6.1f} "
              f"{tb16:6.1f} {t32:6.1f}  {r['fastops'] / tb16:6.2f}x {r['fastops'] / t32:6.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--table", choices=("fp32", "bf16", "both"), default="both")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: the measuring thread's CPU time (with --threads 1 only)")
    args = parser.parse_args()
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu measures one thread: use it with --threads 1")
    import torch
    torch.set_num_threads(args.threads)
    print(cpu_info.describe())
    print(f"{args.threads} threads, {args.clock} clock; load average {os.getloadavg()[0]:.2f} "
          f"(1 min) at start; torch {torch.__version__}")
    if args.table in ("fp32", "both"):
        fp32_table(args.threads, args.clock)
    if args.table in ("bf16", "both"):
        bf16_table(args.threads, args.clock)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")


if __name__ == "__main__":
    main()
