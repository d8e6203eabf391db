#!/usr/bin/env python3
"""bf16 vs fp32 loss curves: the quickstart's model and recipe (examples/quickstart/) trained by
`air train` twice from the same initial weights, data and seed — once in fp32, once with
`bf16: true` (FSDP's bf16 policy: bf16 parameters, activations and reductions; fp32 masters and
AdamW) — for --steps optimizer steps, every step logged. Prints the loss every 25 steps, the
maximum and mean relative difference of the per-step losses (and of the 10-step means, which
average out single-batch noise), writes both curves to a PNG (--plot) and, with --eval, the
held-out exact match of each trained model (air generate on examples/data/tiny_instruct/eval.jsonl).

  AIR_BIN=build/bin/air $(scripts/venv.sh)/bin/python bench/train_precision/curves.py \\
      [--steps 300 --threads 2 --plot docs/bf16-vs-fp32.png --eval]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import cpu_info  # noqa: E402  (bench/cpu_info.py: the machine line)



def run(air, args, model_dir, out, bf16):
    cmd = [air, "train", "--config", "examples/quickstart/train_config.yaml",
           "--set", f"model_name={model_dir}", "--set", f"output_dir={out}",
           "--set", f"bf16={str(bf16).lower()}", "--set", "logging_steps=1",
           "--threads", str(args.threads)]
    if args.steps > 0:
        cmd += ["--set", f"max_steps={args.steps}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"air train failed:\n{proc.stdout}\n{proc.stderr}")
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [m["loss"] for m in map(json.loads, lines) if "loss" in m]


def exact_match(air, model):
    proc = subprocess.run([air, "generate", "--model", str(model), "--dataset",
                           "examples/data/tiny_instruct/eval.jsonl", "--max-new-tokens", "24",
                           "-o", "json"], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"air generate failed:\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(proc.stdout)["data"]
    return data["exact_match"], data["total"]


def means(values, window=10):
    return [sum(values[i:i + window]) / len(values[i:i + window])
            for i in range(0, len(values), window)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="0: the full recipe (12 epochs)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--plot", default="", help="write the curves to this PNG")
    parser.add_argument("--eval", action="store_true", help="held-out exact match of each")
    args = parser.parse_args()
    air = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))
    print(cpu_info.describe())
    with tempfile.TemporaryDirectory(prefix="air_bench_precision_") as tmp:
        work = pathlib.Path(tmp)
        subprocess.run([air, "model", "init", "--config", "examples/quickstart/model.yaml",
                        "--out", str(work / "model"), "--tokenizer",
                        "examples/data/tiny_instruct/tokenizer", "--seed", "0"],
                       cwd=REPO, check=True, capture_output=True)
        fp32 = run(air, args, work / "model", work / "fp32", False)
        bf16 = run(air, args, work / "model", work / "bf16", True)
        evals = {}
        if args.eval:
            evals = {"fp32": exact_match(air, work / "fp32"), "bf16": exact_match(air, work / "bf16")}
    print(f"{'step':>5} {'fp32 loss':>10} {'bf16 loss':>10} {'rel diff':>9}")
    for i in list(range(0, len(fp32), 25)) + [len(fp32) - 1]:
        print(f"{i + 1:5} {fp32[i]:10.4f} {bf16[i]:10.4f} {abs(bf16[i] - fp32[i]) / fp32[i]:9.2e}")
    rel = [abs(b - a) / a for a, b in zip(fp32, bf16)]
    rel10 = [abs(b - a) / a for a, b in zip(means(fp32), means(bf16))]
    print(f"{len(fp32)} steps: per-step losses differ by at most {max(rel):.3g} relative "
          f"(mean {sum(rel) / len(rel):.3g}); 10-step means by at most {max(rel10):.3g} "
          f"(mean {sum(rel10) / len(rel10):.3g})")
    for name, (hits, total) in evals.items():
        print(f"held-out exact match, {name}: {hits} / {total}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        ax.plot(range(1, len(fp32) + 1), fp32, label="fp32", linewidth=1)
        ax.plot(range(1, len(bf16) + 1), bf16, label="bf16 (bf16: true)", linewidth=1, alpha=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("training loss")
        ax.set_title(f"air train, quickstart recipe: bf16 vs fp32 (max relative difference "
                     f"{max(rel):.2g} per step, {max(rel10):.2g} per 10 steps)", fontsize=9)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
