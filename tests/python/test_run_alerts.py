"""Alerts from logs (docs/alerts.md) in a real 2-node run under `air run` (local backend).

Node 1 prints torch's CUDA out-of-memory line (20 times, with a secret's value in it) and exits
1; node 0 then prints ProcessGroupNCCL's watchdog timeout and waits to be stopped. The run's
failure summary leads with the first alert, naming node 1 and rank 1 and the sizes; `air get`,
`air logs --alerts` (text, JSON, filtered by node) and the server's run JSON list the alerts,
bounded to the first 5 of a class per node; the secret is [REDACTED] in every alert. `--alerts`
with a flag it cannot go with is a usage error naming the flag. And a real Gloo collective
timeout (torch's own line, no echo) leads a failure."""
import json
import os
import secrets
import subprocess
import sys

from runtime_jobs.helpers import submit, wait_terminal, write_spec
from tracking_helpers import http, server_token

OOM = ("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
       "has a total capacity of 79.10 GiB of which 1.06 GiB is free. Process 4242 has 78.03 GiB "
       "memory in use. Of the allocated memory 76.50 GiB is allocated by PyTorch, and 1.01 GiB "
       "is reserved by PyTorch but unallocated. job token $HF_TOKEN")
WATCHDOG = ("[rank0]:[E1205 14:00:40.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, "
            "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600081 milliseconds "
            "before timing out.")


def test_alerts_lead_the_failure_and_are_listed(air, air_bin, air_home, tmp_path):
    canary = "CANARY" + secrets.token_hex(10)
    assert air("secrets", "create-scope", "alerts").returncode == 0
    put = subprocess.run([air_bin, "secrets", "put-secret", "alerts", "hf_token"],
                         input=canary.encode(), capture_output=True, timeout=60)
    assert put.returncode == 0, put.stderr
    sync = tmp_path / "sync"
    sync.mkdir()
    # The order of the two lines is forced through files: node 0 prints only after node 1 did.
    command = f"""
echo "node $NODE_RANK starting"
if [ "$NODE_RANK" = 1 ]; then
  for i in $(seq 20); do echo "{OOM}" >&2; done
  touch {sync}/oom_printed
  for i in $(seq 600); do [ -e {sync}/watchdog_printed ] && break; sleep 0.1; done
  exit 1
fi
for i in $(seq 600); do [ -e {sync}/oom_printed ] && break; sleep 0.1; done
echo '{WATCHDOG}' >&2
touch {sync}/watchdog_printed
sleep 120
"""
    run_id = submit(air, write_spec(tmp_path, command, name="alerts", nodes=2,
                                    secrets={"HF_TOKEN": "alerts/hf_token"}))
    run = wait_terminal(air, run_id, timeout=120)
    assert run["state"] == "FAILED", json.dumps(run, indent=1)

    # The failure summary leads with the first alert: node 1's OOM, its rank and sizes.
    summary = run["failure_summary"]
    first_line = summary.splitlines()[0]
    assert first_line.startswith("attempt 0 of 1: first alert: CUDA out of memory on node 1, "
                                 "rank 1 (tried 2.00 GiB, gpu 0, total 79.10 GiB, free 1.06 GiB)"), \
        summary
    assert "torch.OutOfMemoryError" in summary.splitlines()[1], summary
    node_log = air("logs", run_id, "--node", "1", check=True).stdout
    assert "[air] 15 more alert line(s) not recorded as alerts (the first 5 of a class" \
        in node_log, node_log
    assert "node 1 exited with code 1" in summary, summary

    # air get: the alerts, bounded to the first 5 of a class per node, in order.
    alerts = run["alerts"]
    assert [(a["class"], a["node"], a["rank"]) for a in alerts] == \
        [("cuda_oom", 1, 1)] * 5 + [("nccl_timeout", 0, 0)], json.dumps(alerts, indent=1)
    oom, watchdog = alerts[0], alerts[-1]
    assert oom["fields"] == {"tried": "2.00 GiB", "gpu": "0", "total": "79.10 GiB",
                             "free": "1.06 GiB"}
    assert oom["severity"] == "fatal" and oom["stream"] == "err" and oom["attempt"] == 0
    assert watchdog["fields"]["collective"] == "ALLREDUCE"
    assert watchdog["fields"]["ran_ms"] == "600081"
    assert watchdog["time_us"] > oom["time_us"]
    text = air("get", run_id, check=True).stdout
    assert "first alert: CUDA out of memory on node 1, rank 1" in text
    assert f"6 (air logs {run_id} --alerts)" in text
    assert "CUDA out of memory on node 1, rank 1 (tried 2.00 GiB, gpu 0, total 79.10 GiB, " \
        "free 1.06 GiB) x5" in text, text
    assert "NCCL collective timed out on node 0, rank 0 (seq 7, collective ALLREDUCE" in text

    # The secret's value never reaches an alert: redacted before matching.
    assert "job token [REDACTED]" in oom["line"], oom["line"]

    # air logs --alerts: every alert; --node narrows; JSON as air get's.
    listed = air("logs", run_id, "--alerts", check=True).stdout
    assert listed.count("CUDA out of memory on node 1, rank 1") == 5, listed
    assert "NCCL collective timed out on node 0, rank 0" in listed
    assert "Watchdog caught collective operation timeout" in listed
    code, env = air.json("logs", run_id, "--alerts", "--node", "0")
    assert code == 0, env
    assert [a["class"] for a in env["data"]["alerts"]] == ["nccl_timeout"]
    code, env = air.json("logs", run_id, "--alerts", "--retry", "0", "--node", "1")
    assert code == 0 and len(env["data"]["alerts"]) == 5, env

    # The server's run JSON (the UI's source): alerts, and alert events in the timeline.
    air("ui", "--url-only", check=True)  # makes sure the server runs
    info = json.loads((air_home / "tracking" / "server.json").read_text())
    status, body, _ = http("GET", f"{info['url']}/api/air/runs/{run_id}",
                           token=server_token(air_home))
    assert status == 200, body
    served = json.loads(body)
    assert [a["headline"] for a in served["alerts"]] == [a["headline"] for a in alerts]
    assert served["failure_summary"] == summary
    timeline = [e for e in served["events"] if e["kind"] == "alert"]
    assert [(e["node"], e["attempt"]) for e in timeline] == [(1, 0)] * 5 + [(0, 0)]
    assert timeline[0]["message"].startswith("CUDA out of memory on node 1, rank 1")

    # Nothing anywhere holds the secret's value.
    for args in (["get", run_id], ["logs", run_id, "--alerts"], ["logs", run_id, "--node", "1"]):
        for prefix in ([], ["-o", "json"]):
            proc = air(*prefix, *args)
            assert canary not in proc.stdout + proc.stderr, args
    assert canary.encode() not in body


def test_alerts_flag_refuses_flags_it_cannot_go_with(air, tmp_path):
    # A real MemoryError (Python's own traceback), which the job survives.
    command = "python3 -c 'bytearray(1 << 62)' || echo recovered"
    run_id = submit(air, write_spec(tmp_path, command, name="alerts-usage", nodes=1))
    run = wait_terminal(air, run_id, timeout=60)
    assert run["state"] == "SUCCEEDED"
    # An alert in a run that succeeded is still listed; there is no failure summary.
    assert [(a["class"], a["line"]) for a in run["alerts"]] == [("memory_error", "MemoryError")]
    assert not run["failure_summary"]
    for flags, named in ((["--follow"], "--follow"), (["--lines", "5"], "--lines"),
                         (["--minutes", "3"], "--minutes"), (["--timestamps"], "--timestamps"),
                         (["--download-to", str(tmp_path / "d")], "--download-to")):
        proc = air("logs", run_id, "--alerts", *flags)
        assert proc.returncode == 2, (flags, proc.stdout, proc.stderr)
        assert f"--alerts lists the run's alerts and cannot be combined with {named}" in \
            proc.stderr, proc.stderr
        assert proc.stdout == ""
    proc = air("logs", run_id, "--alerts", "--node", "3")
    assert proc.returncode == 2 and "--node 3: run" in proc.stderr, proc.stderr


GLOO_TIMEOUT = """
import datetime, os, time
import torch, torch.distributed as dist
os.environ["RANK"] = os.environ["NODE_RANK"]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
if dist.get_rank() == 0:
    dist.all_reduce(torch.ones(1))  # rank 1 never joins: Gloo gives up after 3 s
else:
    time.sleep(300)  # air stops it once node 0 failed
"""


def test_a_real_gloo_timeout_leads_the_failure(air, tmp_path, monkeypatch):
    """Real torch, no echo: node 0's all_reduce over Gloo, which node 1 never joins, times out;
    torch's own line is the alert that leads the failure summary."""
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(GLOO_TIMEOUT)
    run_id = submit(air, write_spec(tmp_path, "python job.py", name="alerts-gloo", nodes=2,
                                    code_source={"type": "snapshot",
                                                 "snapshot": {"root_path": "code"}},
                                    env_variables={"OMP_NUM_THREADS": "1"}))
    run = wait_terminal(air, run_id, timeout=180)
    assert run["state"] == "FAILED", json.dumps(run, indent=1)
    alerts = run["alerts"]
    assert [(a["class"], a["node"]) for a in alerts] == [("collective_hang", 0)], \
        json.dumps(alerts, indent=1)
    assert alerts[0]["rank"] == 0  # torch prefixes the rank's traceback with "[rank0]:"
    assert alerts[0]["fields"] == {"timeout_ms": "3000", "operation": "recv"}, alerts[0]
    assert "Timed out waiting 3000ms for recv operation to complete" in alerts[0]["line"]
    assert run["failure_summary"].startswith(
        "attempt 0 of 1: first alert: a collective or its watchdog hung on node 0, rank 0 "
        "(timeout_ms 3000, operation recv)"), \
        run["failure_summary"]
