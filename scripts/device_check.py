"""The device check's steps (scripts/device-check.sh runs this on the GPU machine; docs/gpu.md).

  harness  the op harness, the backend contract and gradcheck on every backend the machine can
           run (cuda:0 among them), with the worst error of each op family the GPU measured
  parity   one random-initialized Llama trained 100 steps on the CPU engine and on the device from
           the same weights and data, fp32 and bf16 mixed precision: the loss curves and the final
           weights compared, the differences printed and held to bounds
  resume   on the device: 40 steps straight, and the same run SIGKILLed once checkpoint-20 is
           complete then resumed from it: the final weights must be the same bits
  ranks    2 ranks of air train on one GPU (ddp_backend gloo: staged through the host) against
           1 rank on the same rows: the loss curves within a bound
  bench    air's tokens/s and MFU on the Llama-3.2-1B shape (quick: air alone; full: bench/gpu's
           air-vs-PyTorch table; lora: bench/gpu's GPT-OSS-20B LoRA, air-lora vs peft-seed, issue
           31's must-show: ~5 minutes, so run alone: --skip the other steps, docs/gpu.md)

Each step has its own time limit and the whole run a budget (--budget, seconds): a command runs
at most until the budget ends, a step that cannot start with its minimum left is reported as
skipped, and a hang costs one step, not the lease (a timed-out command is killed with every
process it started: `air launch`'s ranks, `air run`'s agents). What a person reads lands in
--out, three files (the device tool brings back at most eight): summary.md, device-check.json
(the figures) and device-check.log (every command and its output, by step); models, data and
runs stay in --work.
With --device cpu the same steps run on the CPU (the script checking itself: every comparison
then measures 0).
"""
import argparse
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

TINY_LLAMA = """architectures: [LlamaForCausalLM]
vocab_size: 512
hidden_size: 256
intermediate_size: 688
num_hidden_layers: 4
num_attention_heads: 8
num_key_value_heads: 4
max_position_embeddings: 512
rope_theta: 500000.0
tie_word_embeddings: false
bos_token_id: 1
eos_token_id: 2
"""

LLAMA_1B = """architectures: [LlamaForCausalLM]
vocab_size: 128256
hidden_size: 2048
intermediate_size: 8192
num_hidden_layers: 16
num_attention_heads: 32
num_key_value_heads: 8
head_dim: 64
max_position_embeddings: 131072
rms_norm_eps: 1.0e-5
tie_word_embeddings: true
rope_parameters: {rope_type: llama3, rope_theta: 500000.0, factor: 32.0, low_freq_factor: 1.0,
                  high_freq_factor: 4.0, original_max_position_embeddings: 8192}
bos_token_id: 128000
eos_token_id: 128001
"""

# Bounds of the parity step (GPU vs CPU after 100 AdamW steps), per precision: the loss curve's
# largest relative difference and the final weights' largest difference relative to their scale.
BOUNDS = {"fp32": {"loss": 2e-3, "weights": 2e-3}, "bf16": {"loss": 3e-2, "weights": 3e-2}}


# Libraries the bundle leaves to the GPU machine (scripts/device-check.sh pack): the C and C++
# runtimes (the machine's are newer) and the driver's and CUDA's own, matched to its driver.
# Everything else `ldd` lists travels (libcurl too: its name starts like CUDA's).
NOT_CARRIED = re.compile(
    r"/(libc|libm|libstdc\+\+|libgcc_s|ld-linux(-x86-64)?|libresolv|libdl|librt|libpthread)\.so"
    r"|/(libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-[a-z-]+|libnvrtc)\.so")


def carried(library_path):
    """Whether `pack` bundles this library (a path `ldd` printed)."""
    return not NOT_CARRIED.search(library_path)


# Per step: the longest it may take, and the least budget left for it to start at all.
STEP_LIMITS = {"harness": (150, 30), "parity": (150, 40), "resume": (90, 25), "ranks": (75, 20),
               "system_metrics": (45, 15), "bench": (240, 60)}


class OutOfBudget(Exception):
    pass


class Check:
    def __init__(self, args):
        self.args = args
        self.out = pathlib.Path(args.out)
        # Models, data and runs stay outside --out (the device tool brings back 8 files of it).
        self.work = pathlib.Path(args.work)
        self.out.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.air = str(pathlib.Path(args.bin) / "air")
        self.results = {"device": args.device, "budget_s": args.budget, "steps": {}}
        self.deadline = time.monotonic() + args.budget
        self.log_path = self.out / "device-check.log"

    def left(self):
        return self.deadline - time.monotonic()

    def log(self, text):
        with open(self.log_path, "a") as log:
            log.write(text)

    def limit(self, timeout):
        """`timeout` cut to what the budget has left (OutOfBudget when nothing is)."""
        left = self.left()
        if left < 1:
            raise OutOfBudget(f"the step's time limit or the run's {self.args.budget:.0f} s "
                              "budget is spent")
        return min(timeout, left)

    def popen(self, cmd, env=None, stdout=subprocess.PIPE):
        # A session of its own, so that a timeout kills everything the command started.
        return subprocess.Popen([str(c) for c in cmd], stdout=stdout, stderr=subprocess.STDOUT,
                                text=True, env=env or os.environ, start_new_session=True)

    @staticmethod
    def kill(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def run(self, name, cmd, timeout, env=None, check=True):
        """Runs `cmd` for at most `timeout` seconds (and what the budget has left), its output
        appended to device-check.log under `name`; returns the CompletedProcess."""
        timeout = self.limit(timeout)
        self.log(f"[{name}] $ " + " ".join(map(str, cmd)) + "\n")
        proc = self.popen(cmd, env)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(proc)
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # a daemon of another session holds the pipe
                proc.kill()
                out = ""
            self.log(out + f"\n[{name}] killed after {timeout:.0f} s\n")
            raise RuntimeError(f"{cmd[0]} ran past {timeout:.0f} s (killed): {out[-1500:]}")
        finally:
            self.kill(proc)  # anything it left running in its session
        self.log(out)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{cmd[0]} exited {proc.returncode}: {out[-2000:]}")
        return subprocess.CompletedProcess(proc.args, proc.returncode, out)

    # ---- harness ----------------------------------------------------------------------------
    def harness(self):
        core = pathlib.Path(self.args.bin) / "air_engine_core_tests"
        train = pathlib.Path(self.args.bin) / "air_engine_train_tests"
        proc = self.run("harness", [core, f"--gtest_filter={harness_filter(self.args.device)}"],
                        120, check=False)
        proc2 = self.run("harness", [train, "--gtest_filter=TrainDevice.*:FsdpStaged*"], 60,
                         check=False)
        parallel = pathlib.Path(self.args.bin) / "air_engine_parallel_tests"
        proc3 = self.run("harness", [parallel, "--gtest_filter=Nccl*"], 30, check=False)
        proc2.stdout += proc3.stdout
        proc2.returncode = proc2.returncode or proc3.returncode
        worst = {}
        for line in proc.stdout.splitlines():
            m = re.match(r"\[harness\] (\S+)\s+(\S+)\s+(\S+)\s+worst (\S+) \(tolerance (\S+)\)",
                         line)
            if m and (m.group(1).startswith("cuda") or self.args.device == "cpu"):
                key = f"{m.group(1)} {m.group(2)} {m.group(3)}"
                previous = worst.get(key, (0.0, 0.0))[0]
                worst[key] = max(previous, float(m.group(4))), float(m.group(5))
        failed = [l for l in (proc.stdout + proc2.stdout).splitlines() if l.startswith("[  FAILED")]
        ok = proc.returncode == 0 and proc2.returncode == 0
        # On a GPU the harness passes only when it measured the GPU: CUDA's cases skip (pass)
        # where no device is usable, which must read as a failure here, with CUDA's reason.
        if self.args.device != "cpu" and not worst:
            ok = False
            failed.append("cuda:0 never ran: no [harness] cuda line (see backends/notes: CUDA's "
                          "reason)")
        return {"ok": ok, "failed": failed,
                "worst": {k: {"measured": v[0], "tolerance": v[1]} for k, v in worst.items()},
                "backends": [l for l in proc.stdout.splitlines() if l.startswith("[backend]")],
                # The GPU's own lines: the device the trainer sees, the fallback GEMM's error.
                "notes": [l for l in (proc.stdout + proc2.stdout).splitlines()
                          if l.startswith(("[device]", "[cuda]"))]}

    # ---- a model and data --------------------------------------------------------------------
    def model(self, name, config, dtype="float32"):
        model_dir = self.work / name
        if not (model_dir / "config.json").exists():
            (self.work / f"{name}.yaml").write_text(config)
            t0 = time.monotonic()
            self.run("models", [self.air, "model", "init", "--config", self.work / f"{name}.yaml",
                                "--out", model_dir, "--seed", "7", "--dtype", dtype], 600)
            self.results.setdefault("model_init_s", {})[name] = time.monotonic() - t0
        return model_dir

    def rows(self, name, n, seq, vocab):
        path = self.work / f"{name}.jsonl"
        if not path.exists():
            rng = random.Random(11)
            with open(path, "w") as f:
                for _ in range(n):
                    ids = [rng.randrange(3, vocab) for _ in range(seq)]
                    f.write(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
        return path

    def train(self, log, out, device, timeout, extra=(), background=False, **params):
        config = dict(params, output_dir=str(out), device=device)
        cfg = out.parent / f"{out.name}.yaml"
        cfg.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in config.items()))
        cmd = [self.air, "train", "--config", cfg, *extra]
        if background:
            self.log(f"[{log}] $ (in the background) " + " ".join(map(str, cmd)) + "\n")
            with open(self.log_path, "a") as out_file:
                return self.popen(cmd, stdout=out_file)
        return self.run(log, cmd, timeout)

    @staticmethod
    def losses(out):
        return [json.loads(l)["loss"] for l in (out / "metrics.jsonl").read_text().splitlines()]

    @staticmethod
    def weights(out):
        from safetensors.numpy import load_file
        return load_file(str(out / "model.safetensors"))

    # ---- parity ------------------------------------------------------------------------------
    def parity(self):
        model = self.model("tiny", TINY_LLAMA)
        data = self.rows("tiny_rows", 64, 128, 512)
        steps = self.args.steps
        common = dict(model_name=str(model), dataset_name=str(data), max_seq_len=128,
                      per_device_batch_size=4, gradient_accumulation_steps=2, max_steps=steps,
                      learning_rate=5e-4, warmup_steps=5, logging_steps=1, save_steps=0, seed=3)
        report = {"ok": True}
        for precision in ("fp32", "bf16"):
            extra = {"bf16": True} if precision == "bf16" else {}
            runs = []
            for side, device in (("cpu", "cpu"), ("device", self.args.device)):
                out = self.work / f"parity_{precision}_{side}"
                t0 = time.monotonic()
                self.train("parity", out, device, 600, **common, **extra)
                runs.append((out, time.monotonic() - t0))
            (a, ta), (b, tb) = runs
            la, lb = self.losses(a), self.losses(b)
            loss_diff = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(la, lb))
            wa, wb = self.weights(a), self.weights(b)
            import numpy as np
            scale = max(float(np.abs(v.astype(np.float32)).max()) for v in wa.values())
            weight_diff = max(float(np.abs(wa[k].astype(np.float32) - wb[k].astype(np.float32))
                                    .max()) for k in wa) / scale
            bound = BOUNDS[precision]
            ok = loss_diff <= bound["loss"] and weight_diff <= bound["weights"] and \
                len(la) == len(lb) == steps
            report[precision] = {"loss_rel_diff": loss_diff, "weights_rel_diff": weight_diff,
                                 "bounds": bound, "first_loss": la[0], "last_loss": lb[-1],
                                 "cpu_s": ta, "device_s": tb, "ok": ok}
            report["ok"] &= ok
        return report

    # ---- resume ------------------------------------------------------------------------------
    def resume(self):
        model = self.model("tiny", TINY_LLAMA)
        data = self.rows("tiny_rows", 64, 128, 512)
        common = dict(model_name=str(model), dataset_name=str(data), max_seq_len=128,
                      per_device_batch_size=4, gradient_accumulation_steps=2, max_steps=40,
                      learning_rate=5e-4, warmup_steps=5, logging_steps=1, save_steps=20, seed=5,
                      bf16=True)
        dev = self.args.device
        straight, killed, resumed = (self.work / f"resume_{n}" for n in ("a", "b", "c"))
        self.train("resume", straight, dev, 300, **common)
        deadline = time.monotonic() + self.limit(300)  # (before the run: it never outlives it)
        proc = self.train("resume", killed, dev, 300, background=True, **common)
        marker = killed / "checkpoint-20" / "COMPLETE"
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        was_running = proc.poll() is None
        self.kill(proc)  # SIGKILL, as a crash would
        proc.wait()
        if not marker.exists():
            return {"ok": False, "error": "checkpoint-20 never appeared"}
        self.train("resume", resumed, dev, 300,
                   **dict(common, resume_from_checkpoint=str(killed / "checkpoint-20")))
        same_bits = (straight / "model.safetensors").read_bytes() == \
            (resumed / "model.safetensors").read_bytes()
        la, lc = self.losses(straight), self.losses(resumed)
        return {"ok": same_bits and la[20:] == lc[-20:], "same_bits": same_bits,
                "same_losses": la[20:] == lc[-20:], "killed_mid_run": was_running}

    # ---- ranks -------------------------------------------------------------------------------
    def ranks(self):
        """2 ranks of air train on the device (FULL_SHARD; on one GPU: ddp_backend gloo, staged
        through the host) against 1 rank on the same data: the loss curves within a bound."""
        model = self.model("tiny", TINY_LLAMA)
        data = self.rows("tiny_rows", 64, 128, 512)
        common = dict(model_name=str(model), dataset_name=str(data), max_seq_len=128,
                      gradient_accumulation_steps=1, max_steps=20, learning_rate=5e-4,
                      warmup_steps=5, logging_steps=1, save_steps=0, seed=3, bf16=True)
        one, two = self.work / "ranks_1", self.work / "ranks_2"
        self.train("ranks", one, self.args.device, 300, per_device_batch_size=4, **common)
        device = "cuda:0" if self.args.device != "cpu" else "cpu"
        cfg = two.parent / "ranks_2.yaml"
        cfg.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in dict(
            common, per_device_batch_size=2, output_dir=str(two), device=device,
            ddp_backend="gloo", fsdp_sharding_strategy="FULL_SHARD").items()))
        port = 29500 + os.getpid() % 1000
        self.run("ranks", [self.air, "launch", "--standalone", "--nproc-per-node", "2",
                           "--master-port", port, "--no-python", self.air, "train", "--config",
                           cfg], 300)
        a, b = self.losses(one), self.losses(two)
        diff = max(abs(x - y) / abs(x) for x, y in zip(a, b))
        return {"ok": len(a) == len(b) == 20 and diff < 2e-2, "loss_rel_diff": diff,
                "bound": 2e-2, "first_loss": a[0], "last_loss": b[-1]}

    # ---- system metrics ----------------------------------------------------------------------
    def system_metrics(self):
        """`air run` of a one-node job sampled every second: the agent's latest sample (`air get`)
        has the CPU rows and, on a GPU, gpu_0_* rows read through the driver's NVML (issue 32)."""
        home, spec = self.work / "air_home", self.work / "system_metrics.yaml"
        shape = "CPU_1" if self.args.device == "cpu" else "GPU_1xH100"
        spec.write_text("experiment_name: device-check\n"
                        f"compute: {{num_accelerators: 1, accelerator_type: {shape}}}\n"
                        "command: sleep 5\nsystem_metrics_interval_s: 1\n")
        env = dict(os.environ, AIR_HOME=str(home))
        proc = self.run("system_metrics", [self.air, "run", "-f", spec, "--watch", "-o", "json"],
                        120, env=env)
        run_id = json.loads(proc.stdout.strip().splitlines()[-1])["data"]["run_id"]
        got = json.loads(self.run("system_metrics", [self.air, "get", run_id, "-o", "json"], 60,
                                  env=env).stdout)["data"]
        nodes = (got.get("system_metrics") or {}).get("nodes", [])
        metrics = nodes[0]["metrics"] if nodes else {}
        gpu = {k: v for k, v in metrics.items() if k.startswith("gpu_")}
        events = self.run("system_metrics", [self.air, "logs", run_id, "--alerts"], 60, env=env,
                          check=False).stdout[-1000:]
        ok = got["state"] == "SUCCEEDED" and "cpu_utilization_percentage" in metrics
        if self.args.device != "cpu":
            ok = ok and "gpu_0_memory_usage_megabytes" in gpu
        return {"ok": ok, "state": got["state"], "gpu_rows": gpu,
                "cpu_rows": sorted(k for k in metrics if not k.startswith("gpu_")),
                "alerts": events}

    # ---- bench -------------------------------------------------------------------------------
    def bench(self):
        if self.args.bench == "full":
            out = self.work / "bench.json"
            self.run("bench", [sys.executable, REPO / "bench/gpu/bench.py", "--air", self.air,
                               "--json", out, "--cache", self.work], 900)
            return {"ok": True, "table": json.loads(out.read_text())}
        if self.args.bench == "lora":
            return self.bench_lora()
        cpu = self.args.device == "cpu"
        config, seq, vocab = (TINY_LLAMA, 128, 512) if cpu else (LLAMA_1B, 1024, 128256)
        model = self.model("bench_model", config, dtype="bfloat16")
        warmup, steps = 3, 5
        data = self.rows("bench_rows", 8 * (warmup + steps), seq, vocab)
        out = self.work / "bench_run"
        self.train("bench", out, self.args.device, 600, model_name=str(model),
                   dataset_name=str(data), max_seq_len=seq, per_device_batch_size=4,
                   gradient_accumulation_steps=2, max_steps=warmup + steps, bf16=True,
                   activation_checkpointing=True, logging_steps=1, learning_rate=2e-5)
        lines = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
        timed = lines[warmup:]
        seconds = timed[-1]["elapsed_s"] - lines[warmup - 1]["elapsed_s"]
        tokens = 8 * seq * len(timed)
        tok_s = tokens / seconds
        params = self.parameter_count(model)
        layers, hidden = (4, 256) if cpu else (16, 2048)
        flops = (6 * params + 12 * layers * hidden * seq) * tok_s
        peak = max((l.get("peak_memory_bytes") or 0) for l in lines)
        return {"ok": True, "shape": "tiny" if cpu else "llama-1b", "tokens_per_s": tok_s,
                "parameters": params, "mfu": flops / 989e12, "steps": len(timed),
                "peak_memory_gib": peak / 2**30}

    def bench_lora(self):
        """bench/gpu's GPT-OSS LoRA sides (the second seed's recipe in PyTorch + PEFT, and air
        use_peft) on the GPT-OSS-20B shape, inside --bench-deadline; on the CPU the tiny shape
        (the plumbing only). ok: both sides ran; issue31: the must-show's verdict."""
        out = self.out / "bench_lora.json"
        cpu = self.args.device == "cpu"
        shape = ["--shapes", "gpt-oss-tiny", "--device", "cpu", "--threads", "1"] if cpu else \
            ["--shapes", "gpt-oss-20b"]
        self.run("bench", [sys.executable, REPO / "bench/gpu/bench.py", "--air", self.air,
                           *shape, "--steps", 6, "--warmup", 2,
                           "--deadline", self.args.bench_deadline, "--json", out,
                           "--cache", self.bench_cache(45e9 if not cpu else 0)],
                 self.args.bench_deadline + 60)
        entry = next(iter(json.loads(out.read_text())["shapes"].values()))
        summary = entry.get("summary", {})
        sides = {name: {k: r.get(k) for k in ("status", "tokens_per_s", "peak_bytes",
                                              "max_allocated", "error")}
                 for name, r in entry["sides"].items()}
        ok = len(sides) == 2 and all(r["status"] == "ok" for r in sides.values())
        return {"ok": ok, "sides": sides, "model_init": entry.get("air_model_init"),
                "issue31": summary.get("issue31"),
                "summary": {k: v for k, v in summary.items() if k != "issue31"}}

    def bench_cache(self, need_bytes):
        """--work's bench_gpu, or /dev/shm's when --work's file system has no room for the
        model (GPT-OSS-20B: 41.8 GB of bf16 safetensors; the GPU machine's disk is 64 GiB)."""
        for folder in (self.work / "bench_gpu", pathlib.Path("/dev/shm/air_bench_gpu")):
            folder.mkdir(parents=True, exist_ok=True)
            if (folder / "gpt-oss-20b" / "air_model").is_dir() or \
                    shutil.disk_usage(folder).free >= need_bytes:
                return folder
        return self.work / "bench_gpu"  # bench.py names the shortfall

    @staticmethod
    def parameter_count(model_dir):
        """The elements of every tensor in the model's safetensors files (read from their JSON
        headers: any dtype, nothing loaded)."""
        total = 0
        for f in sorted(model_dir.glob("*.safetensors")):
            with open(f, "rb") as fh:
                size = int.from_bytes(fh.read(8), "little")
                header = json.loads(fh.read(size))
            for name, info in header.items():
                if name != "__metadata__":
                    n = 1
                    for d in info["shape"]:
                        n *= d
                    total += n
        return total


def harness_filter(device):
    """The op harness's gtest filter: on a GPU the CUDA backend's cases only (CI runs the CPU
    backends' on every commit) and the tests that name the GPU; on the CPU every backend's.
    OpChecks' death tests stay out on a GPU: each of their ~150 re-executions of the binary would
    initialize CUDA again (the checks they test are one piece of code in front of every backend,
    which CI runs); the valid call on each backend stays in."""
    if device == "cpu":
        return ("*OpsHarness*:*BackendContract*:*GradCheck*:BackendRegistry.*:BackendCoverage.*:"
                "OpChecks.*:*Mxfp4Reference*")
    return ("*/OpsHarness.*/cuda_0_*:*/BackendContract.*/cuda_0:*/GradCheck.*/cuda_0:"
            "OpsHarnessCoverage.*:BackendRegistry.*:BackendCoverage.*:"
            "OpChecks.AValidCallPassesTheChecks:CudaGemm*:MemoryCheckTest.*:"
            "*Mxfp4Reference.EveryBackends*")


def summary(results):
    lines = [f"# device check: {results['device']} (budget {results['budget_s']:.0f} s)", ""]
    for name, r in results["steps"].items():
        verdict = "SKIPPED" if r.get("skipped") else "PASS" if r.get("ok") else "FAIL"
        lines.append(f"## {name}: {verdict} ({r.get('seconds', 0):.0f} s)")
        shown = {k: v for k, v in r.items() if k not in ("ok", "seconds", "worst")}
        lines += ["```", json.dumps(shown, indent=1)[:6000]]
        # The harness: each op family's worst error against its bound (how far under it).
        for key, w in sorted(r.get("worst", {}).items()):
            margin = w["tolerance"] / w["measured"] if w["measured"] > 0 else float("inf")
            lines.append(f"{key:<45} worst {w['measured']:.3g}  tolerance {w['tolerance']:.3g}"
                         f"  ({margin:.3g}x under)")
        lines.append("```")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(REPO / "build/bin"))
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/device-check-out"))
    parser.add_argument("--work", default="/tmp/device-check-work",
                        help="models, data and training runs (kept between runs: models are reused)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=100, help="parity steps")
    parser.add_argument("--skip", default="",
                        help="steps to skip: harness,parity,resume,ranks,system_metrics,bench")
    parser.add_argument("--bench", choices=("quick", "full", "lora"), default="quick")
    parser.add_argument("--bench-deadline", type=int, default=280,
                        help="--bench lora: seconds for bench/gpu (model init and both sides)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for the whole run (default $AIR_DEVICE_CHECK_BUDGET, else "
                             "300 on a GPU: the device tool's timeout_s less a margin for the "
                             "bundle's unpacking and the reply; 1800 on the CPU)")
    parser.add_argument("--carried", action="store_true",
                        help="print which of the library paths on stdin (ldd's) the bundle "
                             "carries, and exit (scripts/device-check.sh pack)")
    args = parser.parse_args()
    if args.carried:
        for line in sys.stdin:
            if line.strip() and carried(line.strip()):
                print(line.strip())
        return 0
    if args.budget is None:
        args.budget = float(os.environ.get("AIR_DEVICE_CHECK_BUDGET",
                                           "1800" if args.device == "cpu" else "300"))
    check = Check(args)
    skip = set(filter(None, args.skip.split(",")))
    for name in ("harness", "parity", "resume", "ranks", "system_metrics", "bench"):
        if name in skip:
            continue
        t0 = time.monotonic()
        limit, least = STEP_LIMITS[name]
        step_end = check.deadline
        if check.left() < least:
            result = {"ok": False, "skipped": True,
                      "error": f"skipped: {check.left():.0f} s of the budget left, the step "
                               f"needs {least} s to start"}
        else:
            # The step's own limit within the budget: a slow step leaves the later ones time.
            if args.device != "cpu":  # (the CPU's own steps take what the budget allows)
                check.deadline = min(step_end, time.monotonic() + limit)
            try:
                result = getattr(check, name)()
            except Exception as e:  # a step that breaks is reported; the others still run
                result = {"ok": False, "error": f"{type(e).__name__}: {e}"[-3000:]}
            check.deadline = step_end
        result["seconds"] = time.monotonic() - t0
        check.results["steps"][name] = result
        verdict = "SKIPPED" if result.get("skipped") else "PASS" if result["ok"] else "FAIL"
        print(f"[device-check] {name}: {verdict} ({result['seconds']:.0f} s, "
              f"{max(check.left(), 0):.0f} s of the budget left)", flush=True)
        (check.out / "device-check.json").write_text(json.dumps(check.results, indent=1))
        (check.out / "summary.md").write_text(summary(check.results))
    print((check.out / "summary.md").read_text())
    return 0 if all(r["ok"] for r in check.results["steps"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
