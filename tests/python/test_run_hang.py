"""Hang detection (hang_timeout_minutes, docs/state-machine.md "Hangs") on a real hang: two
local nodes whose workers block in a real Gloo collective (torch.distributed, rank 0 in an
all_reduce that rank 1 never joins). The run records a `hang` event naming both nodes and their
last lines within hang_timeout_minutes + 30 s of their last output; `on_hang: fail` ends the run
FAILED without a retry, `on_hang: restart` retries and the next attempt completes. What is not a
hang: a progress bar redrawing an unfinished line, and metrics logged by a run that prints
nothing (the real mlflow client into air's store)."""
import datetime
import os
import pathlib
import sqlite3
import sys

from runtime_jobs.helpers import (assert_no_processes_left, explain, stage_venv_job, submit,
                                  wait_terminal, write_spec)

JOB_DIR = pathlib.Path(__file__).parent / "runtime_jobs" / "gloo_hang"
HANG_MINUTES = 0.25  # 15 s: past the job's silent `import torch` on a loaded machine


def hang_spec(tmp_path, monkeypatch, **extra):
    out = stage_venv_job(tmp_path, monkeypatch, JOB_DIR)
    spec = write_spec(tmp_path, "python -u job.py", name="gloo-hang", nodes=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"JOB_OUT": str(out), "OMP_NUM_THREADS": "1"},
                      hang_timeout_minutes=HANG_MINUTES, **extra)
    return spec, out


def events(air_home, run_id, kind):
    db = sqlite3.connect(air_home / "air.db")
    try:
        return db.execute("SELECT message, attempt, ts_us FROM events WHERE run_id = ? AND "
                          "kind = ? ORDER BY id", (run_id, kind)).fetchall()
    finally:
        db.close()


def last_output_us(air_home, run_id, attempt, nodes=2):
    """The time of the newest output record of any node of the attempt (its log timestamps)."""
    newest = 0
    for node in range(nodes):
        log = air_home / "runs" / str(run_id) / f"attempt_{attempt}" / f"node_{node}.log"
        for line in log.read_text().splitlines():
            stamp, stream = line.split(" ", 2)[:2]
            if stream in ("out", "err"):
                t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
                t = t.replace(tzinfo=datetime.timezone.utc)
                newest = max(newest, int(t.timestamp() * 1e6))
    return newest


def check_hang_event(air_home, run_id, attempt):
    hangs = events(air_home, run_id, "hang")
    assert len(hangs) == 1, hangs
    message, event_attempt, ts_us = hangs[0]
    assert event_attempt == attempt
    assert message.startswith("no node wrote output or logged a metric for "), message
    assert f"(hang_timeout_minutes: {HANG_MINUTES})" in message
    assert "went silent first" in message
    # Both nodes are named with their last lines: rank 0 in the collective, rank 1 outside it.
    assert "last lines of node 0:\n" in message and "last lines of node 1:\n" in message, message
    assert "rank 0 entering all_reduce" in message, message
    assert "rank 1 will not join the all_reduce" in message, message
    # Detected within hang_timeout_minutes + 30 s of the last output (a bound, not a timing).
    latency_s = (ts_us - last_output_us(air_home, run_id, attempt)) / 1e6
    print(f"hang detected {latency_s:.1f} s after the last output "
          f"(hang_timeout_minutes {HANG_MINUTES} = {HANG_MINUTES * 60:g} s)")
    assert HANG_MINUTES * 60 <= latency_s <= HANG_MINUTES * 60 + 30, latency_s
    return message


def logs_of(air, run_id, attempt=0):
    return {n: air("logs", run_id, "--node", n, "--retry", attempt).stdout for n in (0, 1)}


def test_a_gloo_hang_fails_the_run_without_a_retry(air, air_home, tmp_path, monkeypatch):
    spec, out = hang_spec(tmp_path, monkeypatch, max_retries=2, on_hang="fail")
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=HANG_MINUTES * 60 + 150)
    assert run["state"] == "FAILED", explain(run, logs_of(air, run_id))
    check_hang_event(air_home, run_id, 0)
    assert run["attempts"] == 1  # on_hang: fail does not retry, max_retries notwithstanding
    summary = run["failure_summary"]
    assert summary.startswith("attempt 0 of 3: hung: no node wrote output"), summary
    assert "node 0" in summary and "node 1" in summary
    attempt = run["attempt_details"][0]
    assert attempt["state"] == "FAILED"
    assert {n["state"] for n in attempt["nodes"]} == {"STOPPED"}
    assert not list(out.iterdir())
    assert not events(air_home, run_id, "retry")
    assert_no_processes_left(air_home, run)


def test_a_gloo_hang_with_on_hang_restart_resumes(air, air_home, tmp_path, monkeypatch):
    spec, out = hang_spec(tmp_path, monkeypatch, max_retries=1, on_hang="restart")
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=HANG_MINUTES * 60 + 240)
    assert run["state"] == "SUCCEEDED", explain(run, logs_of(air, run_id, 1))
    check_hang_event(air_home, run_id, 0)
    assert [a["state"] for a in run["attempt_details"]] == ["FAILED", "SUCCEEDED"]
    assert run["attempt_details"][0]["failure_summary"].startswith("hung: ")
    retries = events(air_home, run_id, "retry")
    assert len(retries) == 1
    assert retries[0][0].startswith("attempt 0 hung; restarting the whole workload as attempt 1 "
                                    "(on_hang: restart"), retries
    # Attempt 1 ran the collective on both ranks: 1 + 2.
    for rank in (0, 1):
        assert (out / f"attempt_1_rank_{rank}.json").exists()
    assert "rank 0 all_reduce sum 3" in air("logs", run_id, "--node", 0).stdout
    assert_no_processes_left(air_home, run)


def test_a_progress_bar_without_newlines_is_not_a_hang(air, air_home, tmp_path):
    """tqdm redraws its bar with '\\r' and writes no newline until it ends: no log record for
    12 s, yet the node is alive (the agent bumps the log's mtime); hang_timeout_minutes 0.1 (6 s)
    must not fire."""
    bar = ("import sys, time\n"
           "for i in range(24):\n"
           "    sys.stderr.write(f'\\r{i * 100 // 24}%|' + '#' * i); sys.stderr.flush()\n"
           "    time.sleep(0.5)\n"
           "sys.stderr.write('\\n')\n")
    (tmp_path / "bar.py").write_text(bar)
    spec = write_spec(tmp_path, f"{sys.executable} {tmp_path / 'bar.py'}", name="bar", nodes=1,
                      hang_timeout_minutes=0.1)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    assert run["state"] == "SUCCEEDED", explain(run, {0: air("logs", run_id, "--node", 0).stdout})
    assert not events(air_home, run_id, "hang")
    assert "95%|" in air("logs", run_id, "--node", 0).stdout  # one record, when the bar ended


def test_logged_metrics_keep_a_silent_run_alive(air, air_home, tmp_path, monkeypatch):
    """Node 0 prints nothing after its first line but logs a metric every second with the real
    mlflow client for 20 s; node 1 prints one line and sleeps. No output for longer than
    hang_timeout_minutes 0.15 (9 s), yet the metrics say the workload lives: no hang."""
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    (tmp_path / "quiet.py").write_text(
        "import os, time\n"
        "print('node', os.environ['NODE_RANK'], 'starting', flush=True)\n"
        "if os.environ['NODE_RANK'] == '0':\n"
        "    import mlflow\n"
        "    mlflow.start_run(run_id=os.environ['MLFLOW_RUN_ID'])\n"
        "    for step in range(1, 21):\n"
        "        mlflow.log_metric('loss', 1.0 / step, step=step)\n"
        "        time.sleep(1)\n"
        "else:\n"
        "    time.sleep(20)\n")
    spec = write_spec(tmp_path, f"python -u {tmp_path / 'quiet.py'}", name="quiet", nodes=2,
                      hang_timeout_minutes=0.15, env_variables={"GIT_PYTHON_REFRESH": "quiet"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=180)
    assert run["state"] == "SUCCEEDED", explain(run, logs_of(air, run_id))
    assert not events(air_home, run_id, "hang")
    assert run["progress"]["step"] == 20  # the metrics were there
