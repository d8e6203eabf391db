"""bench/gpu/bench.py's GPT-OSS LoRA sides (issue 31's must-show: the second seed's recipe on the
GPT-OSS-20B shape, PyTorch + PEFT against `air train` with use_peft) run end to end on the CPU at
the gpt-oss-tiny shape, so the GPU session that measures them never finds the plumbing broken.

Both sides are real: transformers writes the random model once, the PEFT side (peft-seed) loads
those files and trains them with the seed's LoraConfig, eager attention, activation checkpointing
and autocast; the air side (air-lora) is `air train` with use_peft over the same files (air's CPU
device here: its CUDA side needs a GPU). Checked: what the table and the --json file carry (per
side tokens/s, MFU of the active parameters, peak memory, the ratio air-lora / peft-seed, issue
31's verdict), that both sides trained the model written once (first loss at ln(vocab), the
adapters PEFT's all-linear picks on GPT-OSS), that a second run reuses the cached model, and the
refusal of a side that does not run on the shape's family. No figure here says anything about a
GPU."""
import json
import math
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO / "bench/gpu/bench.py"
sys.path.insert(0, str(REPO / "bench/gpu"))
import shapes  # noqa: E402


def bench(air_bin, *args, timeout=600):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, BENCH, "--air", air_bin, "--device", "cpu",
                           "--threads", "1", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_both_lora_sides_run_end_to_end_on_the_tiny_gpt_oss_shape(tmp_path, air_bin):
    cache, out = tmp_path / "cache", tmp_path / "bench.json"
    proc = bench(air_bin, "--shapes", "gpt-oss-tiny", "--steps", 2, "--warmup", 1,
                 "--cache", cache, "--json", out)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads(out.read_text())
    entry = results["shapes"]["gpt-oss-tiny"]
    cfg = shapes.SHAPES["gpt-oss-tiny"]
    assert list(entry["sides"]) == ["peft-seed", "air-lora"], entry["sides"]
    assert entry["recipe"]["lora"] == shapes.SEED2_LORA, entry["recipe"]
    assert (entry["recipe"]["batch"], entry["recipe"]["accum"]) == (1, 2), entry["recipe"]
    assert entry["active_parameters"] < entry["parameters"], entry
    assert entry["air_model_init"]["how"] == "torch" and not entry["air_model_init"]["error"]

    peft, air = entry["sides"]["peft-seed"], entry["sides"]["air-lora"]
    for side in (peft, air):
        assert side["status"] == "ok", side
        assert side["tokens_per_s"] > 0 and side["peak_bytes"] > 0, side
        assert len(side["losses"]) == 3, side  # 1 warm-up + 2 timed steps
        # The model written once, random: both start at ln(vocab).
        assert abs(side["losses"][0] - math.log(cfg["vocab_size"])) < 0.5, side["losses"]
    # The seed's recipe on the PEFT side: all-linear is q/k/v/o_proj on GPT-OSS (no router, no
    # experts: neither is an nn.Linear), eager attention, the same files air reads.
    assert peft["applied"].startswith("PEFT LoRA r 16 alpha 16 dropout 0.05 on "
                                      "k_proj/o_proj/q_proj/v_proj"), peft["applied"]
    assert "activation checkpointing" in peft["applied"] and "autocast" in peft["applied"]
    assert peft["attention"] == "eager", peft
    # air's side: use_peft with the same keys, bf16, activation checkpointing.
    for key in ("use_peft: true", "lora_r: 16", "lora_alpha: 16.0", "lora_dropout: 0.05",
                "lora_target_modules: all-linear", "per_device_batch_size: 1",
                "gradient_accumulation_steps: 2", "bf16: true", "activation_checkpointing: true"):
        assert key in air["config"], (key, air["config"])

    summary = entry["summary"]
    for name in ("peft-seed", "air-lora"):
        s = summary[name]
        want = shapes.mfu(cfg, 64, s["tokens_per_s"], results["header"]["peak_tflops"] * 1e12)
        assert s["mfu"] == want and s["mfu"] > 0, s
        assert s["peak_gib"] > 0, s
    ratio = summary["air-lora"]["vs_seed"]
    assert ratio == air["tokens_per_s"] / peft["tokens_per_s"], summary
    verdict = summary["issue31"]
    assert verdict["gpu"] == "the CPU" and verdict["ok"] is False, verdict  # not the 20B shape
    assert verdict["ratio"] == ratio and verdict["bar_tokens_per_s"] == 3 * 3295.0, verdict

    text = proc.stdout
    assert "== gpt-oss-tiny:" in text and "B active" in text, text[-3000:]
    assert "vs seed: / peft-seed" in text, text[-3000:]
    assert f"air-lora / peft-seed on the CPU: {ratio:.2f}x tokens/s" in text, text[-3000:]
    assert "issue 31 (one H200, gpt-oss-20b): >= 9,885 tok/s" in text, text[-3000:]

    # A second run reuses the model the first one wrote (the cache, as the 20B's 42 GB needs).
    again = bench(air_bin, "--shapes", "gpt-oss-tiny", "--sides", "air-lora", "--steps", 1,
                  "--warmup", 1, "--cache", cache)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "reused (made by torch)" in again.stdout, again.stdout[-3000:]


def test_a_side_of_the_other_family_is_refused_by_name(tmp_path, air_bin):
    proc = bench(air_bin, "--shapes", "gpt-oss-tiny", "--sides", "torch-seed",
                 "--cache", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("--sides: torch-seed runs on llama shapes and --shapes has none (gpt-oss-tiny)"
            in proc.stderr), proc.stderr


def test_the_20b_shape_is_gpt_oss_20b():
    """The must-show's shape: openai/gpt-oss-20b's config (its 20.9 B parameters, 3.6 B of them
    past the embedding active); both GPT-OSS shapes counted as transformers counts them."""
    cfg = shapes.SHAPES["gpt-oss-20b"]
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_local_experts"],
            cfg["num_experts_per_tok"], cfg["vocab_size"]) == (24, 2880, 32, 4, 201088)
    assert "quantization_config" not in cfg  # random init: bf16 experts
    embed = cfg["vocab_size"] * cfg["hidden_size"]
    assert round((shapes.active_parameter_count(cfg) - embed) / 1e9, 1) == 3.6
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    for name in ("gpt-oss-20b", "gpt-oss-tiny"):
        keys = dict(shapes.SHAPES[name])
        config = AutoConfig.for_model(keys.pop("model_type"), **keys)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        assert shapes.parameter_count(shapes.SHAPES[name]) == \
            sum(p.numel() for p in model.parameters()), name


def test_the_device_check_runs_it_as_its_lora_bench(tmp_path, air_bin):
    """`scripts/device-check.sh run` with --bench lora (the command docs/gpu.md gives the GPU
    session: the bundle's air and the machine's libraries) runs both sides and reports them in
    device-check.json and summary.md; here on the CPU at the tiny shape."""
    out, work = tmp_path / "out", tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, REPO / "scripts/device_check.py", "--bin", pathlib.Path(air_bin).parent,
         "--out", out, "--work", work, "--device", "cpu", "--bench", "lora",
         "--skip", "harness,parity,resume,ranks,system_metrics"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    step = json.loads((out / "device-check.json").read_text())["steps"]["bench"]
    assert step["ok"] and sorted(step["sides"]) == ["air-lora", "peft-seed"], step
    assert all(r["tokens_per_s"] > 0 for r in step["sides"].values()), step
    assert step["issue31"]["gpu"] == "the CPU" and step["issue31"]["ok"] is False, step
    assert step["summary"]["air-lora"]["vs_seed"] > 0, step
    assert "## bench: PASS" in (out / "summary.md").read_text()
    # What the device tool brings back (at most eight files): the check's three and the table.
    assert sorted(p.name for p in out.iterdir()) == ["bench_lora.json", "device-check.json",
                                                     "device-check.log", "summary.md"]
