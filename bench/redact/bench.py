#!/usr/bin/env python3
"""Secret redaction throughput: air's streaming Redactor vs Python's re and str.replace, same log.

The log is a training log (timestamped step lines) with a secret value every 50 lines, four
values of 24-43 bytes, one of them spanning two lines. air streams it through
secrets::Redactor in 4 KiB writes (build/bin/air_redact_bench, bench/redact/redact_bench.cc);
the peers redact the whole text at once (an easier job: no values split across writes):
`re.sub` over an alternation of the escaped values, and one `str.replace` per value.
All outputs must be identical. Best of --reps timings each.

  python3 bench/redact/bench.py [--mib 64] [--reps 3]
"""
import argparse
import json
import pathlib
import re
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
VALUES = ["hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "sk-proj-0123456789abcdef",
          "postgres://u:pw@db:5432/x", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq"]
LINE = "2026-11-30T01:02:03.456Z rank0 step 100 loss 1.2345 lr 2e-5 tok/s 5123\n"
MARKER = "[REDACTED]"


def make_log(mib):
    parts, size, i = [], 0, 0
    while size < mib << 20:
        parts.append(LINE)
        size += len(LINE)
        if i % 50 == 0:
            extra = "token " + VALUES[(i // 50) % len(VALUES)] + "\n"
            parts.append(extra)
            size += len(extra)
        i += 1
    return "".join(parts).encode()


def best_of(reps, fn):
    best, out = float("inf"), None
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tool", default=str(REPO / "build/bin/air_redact_bench"))
    args = parser.parse_args()
    log = make_log(args.mib)
    values = [v.encode() for v in VALUES]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "values").write_bytes(b"\0".join(values))
        (tmp / "log").write_bytes(log)
        proc = subprocess.run([args.tool, tmp / "values", tmp / "log", tmp / "out",
                               str(args.reps)], capture_output=True, text=True, check=True)
        air = json.loads(proc.stdout)
        air_out = (tmp / "out").read_bytes()
    pattern = re.compile(b"|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
    re_s, re_out = best_of(args.reps, lambda: pattern.sub(MARKER.encode(), log))

    def replace_all():
        text = log
        for v in values:
            text = text.replace(v, MARKER.encode())
        return text
    rep_s, rep_out = best_of(args.reps, replace_all)
    if not (air_out == re_out == rep_out):
        raise SystemExit("outputs differ: the benchmark compares nothing")
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True,
                         text=True).stdout.strip()
    mib = len(log) / (1 << 20)
    air_rate = air["mib_per_s"]
    print(cpu)
    print(f"{mib:.0f} MiB log, {log.count(b'token ')} secrets, best of {args.reps}; outputs identical")
    print(f"{'redactor':38} {'MiB/s':>8} {'air / peer':>10}")
    print(f"{'air Redactor (streaming, 4 KiB writes)':38} {air_rate:8.0f} {'':>10}")
    for name, secs in (("Python re.sub (alternation, whole text)", re_s),
                       ("Python bytes.replace per value (whole)", rep_s)):
        rate = mib / secs
        print(f"{name:38} {rate:8.0f} {air_rate / rate:9.2f}x")


if __name__ == "__main__":
    main()
