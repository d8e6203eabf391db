"""Shared pieces of the FSDP benchmarks (bench/fsdp/*.py): the machine line, the model and rows,
and one way to run `air train` on N ranks under `air launch` and read back what it measured.

The model and the rows are bench/train_step/bench.py's (a random-initialized transformers Llama
saved once in fp32; pre-tokenized rows of exactly max_seq_len tokens, every token a label), so
the single-process and the several-rank benchmarks train the same kind of model on the same
kind of data. Nothing here is shared between threads; each benchmark is one sequential script.
"""
import argparse
import importlib.util
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import types

REPO = pathlib.Path(__file__).resolve().parents[2]
AIR = os.environ.get("AIR_BIN", str(REPO / "build/bin/air"))

_spec = importlib.util.spec_from_file_location("train_step_bench",
                                               REPO / "bench/train_step/bench.py")
_train_step = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_train_step)
sys.path.insert(0, str(REPO / "bench"))
import cpu_info as _cpu_info  # noqa: E402


def machine_line():
    """bench/cpu_info.py's line (model, CPUs, kernel flags, load): read figures with it."""
    return _cpu_info.describe()


def build_model(model_dir, layers, hidden, vocab, seq):
    """Saves the random-initialized Llama (bench/train_step's) and returns its parameter count."""
    from transformers.utils import logging
    logging.disable_progress_bar()
    args = types.SimpleNamespace(layers=layers, hidden=hidden, vocab=vocab, seq=seq)
    return _train_step.build_model(args, model_dir)


def write_rows(path, rows, seq, vocab):
    """`rows` pre-tokenized rows of `seq` random ids (bench/train_step's generator)."""
    args = types.SimpleNamespace(batch=rows, steps=1, warmup=0, seq=seq, vocab=vocab)
    return _train_step.write_rows(args, path)


def model_parser(doc, layers, hidden, vocab, seq, timed=True):
    """The benchmarks' common flags: the model's shape, and (timed) --steps/--warmup/--repeats,
    which parse_timed checks."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--hidden", type=int, default=hidden)
    parser.add_argument("--vocab", type=int, default=vocab)
    parser.add_argument("--seq", type=int, default=seq)
    if timed:
        parser.add_argument("--steps", type=int, default=10, help="timed optimizer steps")
        parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    return parser


def parse_timed(parser):
    args = parser.parse_args()
    if args.warmup < 1 or args.steps < 1 or args.repeats < 1:
        parser.error("--warmup, --steps and --repeats must be >= 1 (timing starts after the "
                     "warm-up steps)")
    return args


def prepare(work, args, rows):
    """Saves the model of args' shape and `rows` rows under `work`; returns the model directory,
    the rows file, the parameter count and a line describing the model."""
    model_dir, data = work / "model", work / "rows.jsonl"
    params = build_model(model_dir, args.layers, args.hidden, args.vocab, args.seq)
    write_rows(data, rows, args.seq, args.vocab)
    line = (f"model: Llama {args.layers} layers, hidden {args.hidden}, vocab {args.vocab}, "
            f"{params / 1e6:.2f} M parameters, fp32")
    return model_dir, data, params, line


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_config(path, **keys):
    """Writes an `air train` YAML: the benchmark defaults (fp32, constant lr, AdamW with decay
    0.01 and clipping at 1.0, every step logged, no periodic checkpoints) overridden by `keys`."""
    cfg = {"max_seq_len": 256, "per_device_batch_size": 2, "gradient_accumulation_steps": 1,
           "learning_rate": 1e-4, "lr_scheduler_type": "constant", "weight_decay": 0.01,
           "max_grad_norm": 1.0, "logging_steps": 1, "save_steps": 0, "seed": 0,
           "bf16": "false", "activation_checkpointing": "false"}
    cfg.update(keys)
    path.write_text("".join(f"{k}: {v}\n" for k, v in cfg.items()))


class AirRun:
    """What one `air train` run measured: rank 0's -o json data, its metrics.jsonl rows, and
    each rank's peak RSS (bytes, from /usr/bin/time -v), in rank order."""

    def __init__(self, data, metrics, peak_rss):
        self.data, self.metrics, self.peak_rss = data, metrics, peak_rss

    @property
    def parallel(self):
        return self.data.get("parallel", {})

    def steps(self):
        return [m for m in self.metrics if "loss" in m and "step" in m]

    def tokens_per_s(self, warmup):
        """Tokens/s between the end of step `warmup` and the last step (loading, the first steps
        and the checkpoint excluded), as bench/train_step does."""
        steps = self.steps()
        first, last = steps[warmup - 1], steps[-1]
        return (last["tokens"] - first["tokens"]) / (last["elapsed_s"] - first["elapsed_s"])


_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def _envelope(text):
    """The -o json envelope: the last stdout line that parses as a JSON object with `data`."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "data" in doc:
                return doc
    return None


def run_air(work, name, config, nproc, threads, dump=None, timeout=600):
    """Runs `air -o json train --config CONFIG --threads T` on `nproc` ranks (one plain process
    when nproc is 0: no launcher, world size 1), each under /usr/bin/time -v for its peak RSS.
    nproc >= 1 goes through `air launch --standalone --nproc-per-node N --no-python` with a log
    directory, so each rank's output (and its time -v report) is read back separately."""
    train = [AIR, "-o", "json", "train", "--config", str(config), "--threads", str(threads)]
    if dump is not None:
        train += ["--dump-batches", str(dump)]
    timed = ["/usr/bin/time", "-v"] + train
    if nproc == 0:
        proc = subprocess.run(timed, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            sys.exit(f"{name}: air train failed ({proc.returncode}):\n{proc.stdout}\n"
                     f"{proc.stderr}")
        outputs = [(proc.stdout, proc.stderr)]
    else:
        logs = work / f"{name}_logs"
        cmd = [AIR, "launch", "--standalone", "--nproc-per-node", str(nproc), "--master-port",
               str(free_port()), "--log-dir", str(logs), "--no-python"] + timed
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        files = sorted(logs.glob("attempt_*/node_0/*/output.log"),
                       key=lambda p: int(p.parent.name))
        if proc.returncode != 0 or len(files) != nproc:
            tails = "\n".join(f"--- {f}\n{f.read_text()[-3000:]}" for f in files)
            sys.exit(f"{name}: air launch failed ({proc.returncode}):\n{proc.stdout}\n"
                     f"{proc.stderr}\n{tails}")
        outputs = [(f.read_text(), f.read_text()) for f in files]
    doc = _envelope(outputs[0][0])
    if doc is None:
        sys.exit(f"{name}: no -o json envelope in rank 0's output:\n{outputs[0][0][-3000:]}")
    rss = []
    for _, err in outputs:
        found = _RSS.search(err)
        rss.append(int(found.group(1)) * 1024 if found else None)
    metrics_path = pathlib.Path(doc["data"]["metrics"])
    metrics = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    return AirRun(doc["data"], metrics, rss)


def read_dump(path):
    """One rank's --dump-batches file: its micro-batches in training order."""
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def mib(n):
    return n / (1024.0 * 1024.0)
