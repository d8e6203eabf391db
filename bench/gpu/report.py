"""What bench/gpu/bench.py prints and writes: the header (GPU, driver, versions, date, command
line), one line per side as it finishes, a table per shape and the --json file."""
import json
import os
import pathlib

import shapes

GIB = 1024.0 ** 3
ORDER = ["torch-seed", "torch-best", "air", "air-bf16"]
LABELS = {"torch-seed": "torch-seed", "torch-best": "torch-best", "air": "air",
          "air-bf16": "air (bf16 state)"}


def print_header(head, recipe, args):
    torch = head["torch"]
    if head["device"] == "cuda":
        gpu = head["gpu"]
        smi = gpu["nvidia_smi"] or {}
        print(f"GPU {gpu['index']}: {gpu['torch_name'] or smi.get('name', '?')}; driver "
              f"{smi.get('driver', '?')}; {smi.get('memory_mib', 0) / 1024:.1f} GiB")
    else:
        print("device: CPU (smoke mode: figures say nothing about a GPU)")
    print(f"torch {torch.get('torch', '?')} (CUDA {torch.get('cuda')}), transformers "
          f"{torch.get('transformers', '?')}; {head['air']} ({head['air_bin']})")
    print(f"date {head['date']}; command: {head['command']}")
    print(f"host: {head['host']}")
    print(f"recipe: {recipe.describe()}; {args.steps} timed steps after {args.warmup}")
    print(f"MFU = (6·N + 12·L·H·T)·tok/s / {args.peak_tflops:g} TFLOP/s (N all parameters; "
          "989: H100/H200 SXM dense bf16, datasheet)")
    best = ("FSDP1 FULL_SHARD (use_orig_params)" if args.best_fsdp else
            "no FSDP (world size 1: FSDP1 has nothing to shard and runs NO_SHARD)")
    print(f"torch-best: {best}, bf16 model, torch.compile ({args.best_compile}), fused AdamW, "
          f"activation checkpointing {'on' if args.best_ac else 'off unless out of memory'}")
    print("peak GiB: nvidia-smi memory.used every 0.2 s minus the idle reading before the side"
          if head["device"] == "cuda" else "peak GiB: the side's process tree's RSS (psutil)")
    print(flush=True)


def _gib(n):
    return "n/a" if n is None else f"{n / GIB:.2f}"


def print_side(side, r):
    """One line as soon as a side finishes (the table comes after all of them)."""
    if r["status"] != "ok":
        print(f"  {side}: {r['status'].upper()}")
        print("    " + "\n    ".join(r.get("error", "").splitlines()[-20:]), flush=True)
        return
    losses = r.get("losses") or [float("nan")]
    extra = []
    if r.get("applied"):
        extra.append(r["applied"])
    if r.get("note"):
        extra.append(r["note"])
    extra += r.get("plan", [])
    if r.get("estimate_bytes"):
        extra.append(f"air's own estimate {_gib(r['estimate_bytes'])} GiB")
    print(f"  {side}: {r['tokens_per_s']:.0f} tok/s; peak {_gib(r.get('peak_bytes'))} GiB"
          + (f" (max allocated {_gib(r['max_allocated'])} GiB)" if "max_allocated" in r else "")
          + f"; first step {_first_step(r)} s; wall {r.get('wall_s', 0):.0f} s; loss "
          f"{losses[0]:.4f} -> {losses[-1]:.4f}")
    for line in extra:
        print(f"    {line}")
    print(flush=True)


def _first_step(r):
    if "step_s" in r:  # torch: the first step's own time
        return f"{r['step_s'][0]:.1f}"
    return f"{r['first_step_s']:.1f}" if "first_step_s" in r else "n/a"


def summarize(cfg, entry, recipe, peak_tflops):
    """Per side: tokens/s, MFU, peak GiB, max allocated GiB and the two ratios (None where a
    side or its reference did not run)."""
    sides = entry["sides"]
    seed, best = sides.get("torch-seed"), sides.get("torch-best")
    out = {}
    for side in [s for s in ORDER if s in sides]:
        r = sides[side]
        if r["status"] != "ok":
            out[side] = {"status": r["status"], "oom": bool(r.get("oom"))}
            continue
        tps = r["tokens_per_s"]

        def ratio(ref):
            ok = ref and ref.get("status") == "ok"
            return tps / ref["tokens_per_s"] if ok else None
        out[side] = {"status": "ok", "tokens_per_s": tps,
                     "mfu": shapes.mfu(cfg, recipe.seq, tps, peak_tflops * 1e12),
                     "peak_gib": _num_gib(r.get("peak_bytes")),
                     "max_allocated_gib": _num_gib(r.get("max_allocated")),
                     "vs_torch_seed": ratio(seed), "vs_torch_best": ratio(best)}
    return out


def _num_gib(n):
    return None if n is None else n / GIB


def _fmt(value, spec, missing="n/a"):
    return missing if value is None else format(value, spec)


def _times(ratio):
    return "-" if ratio is None else f"{ratio:.2f}x"


def print_table(name, cfg, entry, recipe, args):
    summary = summarize(cfg, entry, recipe, args.peak_tflops)
    print(f"== {name}: {shapes.parameter_count(cfg) / 1e9:.3f} B parameters, "
          f"{entry['flops_per_token'] / 1e9:.2f} GFLOP/token; batch {recipe.batch} x "
          f"{recipe.seq}, accumulation {recipe.accum}; MFU of {args.peak_tflops:g} TFLOP/s")
    cols = (f"{'side':18} {'tok/s':>9} {'MFU':>6} {'peak GiB':>9} {'alloc GiB':>9} "
            f"{'vs seed':>8} {'vs best':>8} {'1st step s':>10}  note")
    print(cols)
    print("-" * len(cols))
    for side, s in summary.items():
        r = entry["sides"][side]
        if s["status"] != "ok":
            why = "OOM" if s["oom"] else s["status"].upper()
            print(f"{LABELS[side]:18} {why:>9}  {_first_line(r.get('error', ''))}")
            continue
        note = r.get("note") or (("AC on" if r.get("ac") else "AC off")
                                 if side.startswith("torch") else "")
        print(f"{LABELS[side]:18} {s['tokens_per_s']:9.0f} {100 * s['mfu']:5.1f}% "
              f"{_fmt(s['peak_gib'], '.2f'):>9} {_fmt(s['max_allocated_gib'], '.2f'):>9} "
              f"{_times(s['vs_torch_seed']):>8} {_times(s['vs_torch_best']):>8} "
              f"{_first_step(r):>10}  {note}")
    print(flush=True)
    return summary


def _first_line(text):
    """The most telling line of an error: the last non-empty one."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:110] if lines else ""


def write_json(path, results):
    if not path:
        return
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str))
    os.replace(tmp, path)
