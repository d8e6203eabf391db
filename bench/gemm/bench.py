#!/usr/bin/env python3
"""GEMM throughput: the engine's fast CPU matrix multiply vs torch.mm, same shapes and threads.

The shapes are the products of one training step of a small Llama (1024 tokens, hidden 256,
MLP 640, vocab 4096): the forward X W^T, the input gradient dY W, the weight gradient dY^T X,
the LM head, plus a square 2048 product. air runs build/bin/air_gemm_bench (bench/gemm/
gemm_bench.cc, FastOps::Gemm); PyTorch runs torch.mm on the same operands' shapes and layouts.

  $(scripts/venv.sh)/bin/python bench/gemm/bench.py [--threads 2]
  AIR_CPU_KERNELS=avx2 ... measures the AVX2 kernel instead of the AVX-512 one.
"""
import argparse
import json
import os
import pathlib
import subprocess
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
SHAPES = [  # (what, m, n, k, trans_a, trans_b)
    ("X W^T (MLP up)", 1024, 640, 256, 0, 1),
    ("X W^T (MLP down)", 1024, 256, 640, 0, 1),
    ("LM head", 1024, 4096, 256, 0, 1),
    ("dY W (input grad)", 1024, 256, 640, 0, 0),
    ("dY^T X (weight grad)", 640, 256, 1024, 1, 0),
    ("square 2048", 2048, 2048, 2048, 0, 0),
]


def torch_gflops(m, n, k, ta, tb):
    import torch
    a = torch.randn(k, m) if ta else torch.randn(m, k)
    b = torch.randn(n, k) if tb else torch.randn(k, n)
    lhs, rhs = (a.t() if ta else a), (b.t() if tb else b)
    torch.mm(lhs, rhs)
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.5:
        torch.mm(lhs, rhs)
        reps += 1
    return 2 * m * n * k * reps / (time.perf_counter() - start) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    tool = os.environ.get("AIR_GEMM_BENCH", str(REPO / "build/bin/air_gemm_bench"))
    shapes = [f"{m},{n},{k},{ta},{tb}" for _, m, n, k, ta, tb in SHAPES]
    proc = subprocess.run([tool, str(args.threads), *shapes], capture_output=True, text=True,
                          check=True)
    air = [json.loads(line) for line in proc.stdout.splitlines()]
    print(f"{args.threads} threads; air kernels: {air[0]['kernels']}")
    print(f"{'product':22} {'m':>5} {'n':>5} {'k':>5}  {'air GFLOP/s':>11} {'torch':>8} {'ratio':>6}")
    for (what, m, n, k, ta, tb), result in zip(SHAPES, air):
        ref = torch_gflops(m, n, k, ta, tb)
        print(f"{what:22} {m:5} {n:5} {k:5}  {result['gflops']:11.1f} {ref:8.1f} "
              f"{result['gflops'] / ref:5.2f}x")


if __name__ == "__main__":
    main()
