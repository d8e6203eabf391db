"""`air logs --lines N` and `--follow --lines N` read a node log from its end: a 3 GB log
(sparse: 3 GB of file, a few real records at its end) shows its last lines with the resident
set of `air logs` on a 100-byte log, give or take 16 MiB, not gigabytes (ru_maxrss, not a
timing). A node log past
its size cap (AIR_NODE_LOG_MAX_BYTES) rotates to node_N.log.1, .2 (AIR_NODE_LOG_KEEP), and
`air logs --lines` reads across the parts."""
import os
import subprocess
import sys

from runtime_jobs.helpers import submit, wait_terminal, write_spec

GB = 1 << 30


def rss_of(argv):
    """(stdout, peak RSS in MiB) of `argv`, measured by a fresh Python process whose only child
    it is (ru_maxrss of RUSAGE_CHILDREN is the largest child ever waited for)."""
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "sys.stdout.write(p.stdout)\n"
             "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
             "sys.exit(p.returncode)\n")
    proc = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc
    return proc.stdout, int(proc.stderr.strip().splitlines()[-1]) / 1024


def test_lines_and_follow_read_a_3gb_log_from_its_end(air, air_home, tmp_path):
    run_id = submit(air, write_spec(tmp_path, "echo first", nodes=1))
    assert wait_terminal(air, run_id, timeout=60)["state"] == "SUCCEEDED"
    log = air_home / "runs" / str(run_id) / "attempt_0" / "node_0.log"
    _, baseline = rss_of([air.binary, "logs", str(run_id), "--lines", "5"])
    print(f"air logs --lines 5 on a {log.stat().st_size} byte log: peak RSS {baseline:.1f} MiB")
    records = log.read_bytes()
    with open(log, "r+b") as f:
        f.truncate(3 * GB)  # a hole: 3 GB of file on almost no disk
        f.seek(3 * GB)
        f.write(records)
        for i in range(10):
            f.write(f"2026-12-01T00:00:0{i}.000000Z out tail line {i}\n".encode())
    assert log.stat().st_size > 3 * GB
    out, rss = rss_of([air.binary, "logs", str(run_id), "--lines", "5"])
    print(f"air logs --lines 5 on a {log.stat().st_size / GB:.2f} GiB log: peak RSS {rss:.1f} MiB")
    assert out.splitlines() == [f"tail line {i}" for i in range(5, 10)]
    assert rss < baseline + 16, (rss, baseline)  # reading whole would be 3000+ MiB
    out, rss = rss_of([air.binary, "logs", str(run_id), "--follow", "--lines", "3"])
    print(f"air logs --follow --lines 3: peak RSS {rss:.1f} MiB")
    assert out.splitlines()[-3:] == [f"tail line {i}" for i in range(7, 10)]
    assert "first" not in out
    assert rss < baseline + 16, (rss, baseline)


def test_node_log_rotates_past_its_cap(air, air_home, tmp_path, monkeypatch):
    monkeypatch.setenv("AIR_NODE_LOG_MAX_BYTES", "20000")
    monkeypatch.setenv("AIR_NODE_LOG_KEEP", "2")
    command = "for i in $(seq 1 3000); do echo \"record $i\"; done"
    run_id = submit(air, write_spec(tmp_path, command, nodes=1))
    assert wait_terminal(air, run_id, timeout=60)["state"] == "SUCCEEDED"
    attempt = air_home / "runs" / str(run_id) / "attempt_0"
    parts = sorted(p.name for p in attempt.iterdir() if p.name.startswith("node_0.log"))
    assert parts == ["node_0.log", "node_0.log.1", "node_0.log.2"], parts
    assert all((attempt / p).stat().st_size <= 20000 for p in parts)
    lines = air("logs", run_id, "--lines", "600", check=True).stdout.splitlines()
    assert lines[-1].startswith("[air] command exited with code 0")
    records = [l for l in lines if l.startswith("record ")]
    numbers = [int(l.split()[1]) for l in records]
    assert numbers == list(range(numbers[0], 3001)) and len(numbers) >= 590
    bad = write_spec(tmp_path, "true", nodes=1, filename="bad.yaml")
    proc = air("run", "-f", bad, "--watch",
               env=dict(os.environ, AIR_NODE_LOG_MAX_BYTES="lots"))
    assert proc.returncode != 0 and "AIR_NODE_LOG_MAX_BYTES='lots'" in proc.stdout + proc.stderr
