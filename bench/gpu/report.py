"""What bench/gpu/bench.py prints and writes: the header (GPU, driver, versions, date, command
line), one line per side as it finishes, a table per shape (with, for GPT-OSS, the closing line
air-lora / peft-seed against issue 31's bar) and the --json file."""
import json
import os
import pathlib

import shapes

GIB = 1024.0 ** 3
ORDER = ["torch-seed", "torch-best", "air", "air-bf16", "peft-seed", "air-lora"]
LABELS = {"torch-seed": "torch-seed", "torch-best": "torch-best", "air": "air",
          "air-bf16": "air (bf16 state)", "peft-seed": "peft-seed", "air-lora": "air-lora"}
# The reference sides of each family: the seed's recipe in PyTorch, and PyTorch's best.
REFERENCES = {"llama": ("torch-seed", "torch-best"), "gpt_oss": ("peft-seed", None)}
# Issue 31's must-show on one H200: the second seed's recipe on the GPT-OSS-20B shape made
# 3,295 tok/s in PyTorch + PEFT (shared/design/GPU.md); air must make >= 3x that, >= 25% MFU,
# with a peak below PyTorch's.
ISSUE31 = {"peft_tokens_per_s": 3295.0, "factor": 3.0, "mfu": 0.25}


def print_header(head, args):
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
    print(f"MFU = (6·N_active + 12·d_attn·ΣT_l)·tok/s / {args.peak_tflops:g} TFLOP/s (N_active: "
          "the parameters a token goes through, embeddings and head included (Llama: all; "
          "GPT-OSS: top-k of the experts); d_attn = heads x head_dim; T_l: the keys a query sees "
          "in layer l (T, or the sliding window); Llama: 6·N + 12·L·H·T; 989: H100/H200 SXM "
          "dense bf16, datasheet)")
    best = ("FSDP1 FULL_SHARD (use_orig_params)" if args.best_fsdp else
            "no FSDP (world size 1: FSDP1 has nothing to shard and runs NO_SHARD)")
    if "torch-best" in args.side_list:
        print(f"torch-best: {best}, bf16 model, torch.compile ({args.best_compile}), fused "
              f"AdamW, activation checkpointing "
              f"{'on' if args.best_ac else 'off unless out of memory'}")
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
    """Per side: tokens/s, MFU, peak GiB, max allocated GiB and the ratios to the family's
    seed side (torch-seed; peft-seed) and best side (torch-best; none for GPT-OSS), None where a
    side or its reference did not run."""
    sides = entry["sides"]
    seed_name, best_name = REFERENCES[shapes.family(cfg)]
    seed, best = sides.get(seed_name), sides.get(best_name)
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
                     "vs_seed": ratio(seed), "vs_best": ratio(best)}
    return out


def _num_gib(n):
    return None if n is None else n / GIB


def _fmt(value, spec, missing="n/a"):
    return missing if value is None else format(value, spec)


def _times(ratio):
    return "-" if ratio is None else f"{ratio:.2f}x"


def print_table(name, cfg, entry, recipe, args):
    summary = summarize(cfg, entry, recipe, args.peak_tflops)
    active = ("" if shapes.family(cfg) == "llama" else
              f" ({shapes.active_parameter_count(cfg) / 1e9:.3f} B active)")
    seed_name, best_name = REFERENCES[shapes.family(cfg)]
    print(f"== {name}: {shapes.parameter_count(cfg) / 1e9:.3f} B parameters{active}, "
          f"{entry['flops_per_token'] / 1e9:.2f} GFLOP/token; batch {recipe.batch} x "
          f"{recipe.seq}, accumulation {recipe.accum}; MFU of {args.peak_tflops:g} TFLOP/s; "
          f"vs seed: / {seed_name}" + (f", vs best: / {best_name}" if best_name else ""))
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
              f"{_times(s['vs_seed']):>8} {_times(s['vs_best']):>8} "
              f"{_first_step(r):>10}  {note}")
    print(flush=True)
    if shapes.family(cfg) == "gpt_oss":
        summary["issue31"] = lora_verdict(name, summary, entry, args)
    return summary


def lora_verdict(name, summary, entry, args):
    """air-lora / peft-seed on this GPU, and issue 31's bar (meaningful on an H200 at the
    gpt-oss-20b shape; printed for any run, its GPU named)."""
    air, peft = summary.get("air-lora"), summary.get("peft-seed")
    head = entry.get("gpu_name") or "the CPU"
    if not (air and air["status"] == "ok"):
        print(f"air-lora / peft-seed on {head}: air-lora did not run to the end")
        return {"gpu": head, "ok": False}
    bar = ISSUE31["factor"] * ISSUE31["peft_tokens_per_s"]
    verdict = {"gpu": head, "air_tokens_per_s": air["tokens_per_s"], "air_mfu": air["mfu"],
               "bar_tokens_per_s": bar, "bar_mfu": ISSUE31["mfu"],
               "ratio": air["vs_seed"], "air_peak_gib": air["peak_gib"],
               "peft_peak_gib": peft and peft.get("peak_gib")}
    ok_speed = air["tokens_per_s"] >= bar and air["mfu"] >= ISSUE31["mfu"]
    ok_memory = (air["peak_gib"] is not None and verdict["peft_peak_gib"] is not None
                 and air["peak_gib"] < verdict["peft_peak_gib"])
    verdict["ok"] = bool(ok_speed and ok_memory and name == "gpt-oss-20b")
    print(f"air-lora / peft-seed on {head}: {_times(air['vs_seed'])} tokens/s "
          f"({air['tokens_per_s']:.0f} vs "
          f"{'n/a' if not peft or peft['status'] != 'ok' else format(peft['tokens_per_s'], '.0f')}"
          f"); peak {_fmt(air['peak_gib'], '.2f')} vs {_fmt(verdict['peft_peak_gib'], '.2f')} GiB")
    print(f"issue 31 (one H200, gpt-oss-20b): >= {bar:,.0f} tok/s (3 x 3,295) and >= "
          f"{100 * ISSUE31['mfu']:.0f}% MFU: {'yes' if ok_speed else 'no'} "
          f"({air['tokens_per_s']:,.0f} tok/s, {100 * air['mfu']:.1f}%); peak below "
          f"peft-seed's: {'yes' if ok_memory else 'no'}"
          + ("" if name == "gpt-oss-20b" else f" (shape {name}: not the must-show's)"))
    print(flush=True)
    return verdict


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
