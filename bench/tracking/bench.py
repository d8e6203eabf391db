"""Metrics logged per second through the real mlflow client (PyPI), unbatched (log_metric, one
request per point) and batched (log_batch, 1000 points a request), into `air server` and into a
real `mlflow server` with a SQLite backend, side by side on this machine, one run each; the
ratio; and the air server's resident memory after 1M stored points.

    python bench/tracking/bench.py [--air build/bin/air] [--unbatched 2000] [--batched 100000]
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[2]

CLIENT = r"""
import json, sys, time
from mlflow import MlflowClient
from mlflow.entities import Metric
c = MlflowClient()
mode, n = sys.argv[1], int(sys.argv[2])
run = c.create_run(c.create_experiment(f"bench-{mode}-{time.time_ns()}")).info.run_id
start = time.perf_counter()
if mode == "unbatched":
    for s in range(n):
        c.log_metric(run, "loss", 1.0 / (s + 1), step=s)
else:
    ts = int(time.time() * 1000)
    for b in range(0, n, 1000):
        c.log_batch(run, metrics=[Metric("loss", 1.0 / (s + 1), ts, s) for s in range(b, min(n, b + 1000))])
elapsed = time.perf_counter() - start
assert len(c.get_metric_history(run, "loss")) == n
print(json.dumps({"points": n, "seconds": elapsed}))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_health(url, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server at {url} did not start")
            time.sleep(0.3)


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(url, mode, n, token=None):
    env = dict(os.environ, MLFLOW_TRACKING_URI=url, NO_PROXY="*", GIT_PYTHON_REFRESH="quiet")
    if token:  # air server needs its token on every request (MLFLOW_TRACKING_TOKEN)
        env["MLFLOW_TRACKING_TOKEN"] = token
    out = subprocess.run([sys.executable, "-c", CLIENT, mode, str(n)], env=env, check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["points"] / r["seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--air", default=str(REPO / "build" / "bin" / "air"))
    ap.add_argument("--unbatched", type=int, default=2000)
    ap.add_argument("--batched", type=int, default=100000)
    ap.add_argument("--memory-points", type=int, default=1000000)
    args = ap.parse_args()
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True,
                         text=True).stdout.strip()
    print(cpu)
    with tempfile.TemporaryDirectory() as tmp:
        home = pathlib.Path(tmp) / "air_home"
        air = subprocess.Popen([args.air, "-o", "json", "server"], env=dict(os.environ, AIR_HOME=str(home)),
                               stdout=subprocess.PIPE, text=True)
        air_url = json.loads(air.stdout.readline())["data"]["url"]
        air_token = (home / "tracking" / "server.token").read_text().strip()
        port = free_port()
        mlflow_bin = os.path.join(os.path.dirname(sys.executable), "mlflow")
        peer = subprocess.Popen([mlflow_bin, "server", "--backend-store-uri",
                                 f"sqlite:///{tmp}/mlflow.db", "--host", "127.0.0.1", "--port",
                                 str(port), "--workers", "1"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        peer_url = f"http://127.0.0.1:{port}"
        try:
            wait_health(peer_url, peer)
            for mode, n in (("unbatched", args.unbatched), ("batched", args.batched)):
                a = measure(air_url, mode, n, air_token)
                m = measure(peer_url, mode, n)
                print(f"{mode:9s} {n:7d} points: air server {a:10.0f} points/s, mlflow server "
                      f"(SQLite) {m:10.0f} points/s, ratio {a / m:.2f}x")
            measure(air_url, "batched", args.memory_points, air_token)
            print(f"air server RSS after {args.memory_points + args.batched + args.unbatched} "
                  f"stored points: {rss_mib(air.pid):.1f} MiB "
                  f"(air.db {os.path.getsize(home / 'air.db') / 2**20:.1f} MiB + WAL)")
        finally:
            air.send_signal(signal.SIGTERM)
            air.wait(timeout=30)
            os.killpg(peer.pid, signal.SIGTERM)
            peer.wait(timeout=30)


if __name__ == "__main__":
    main()
