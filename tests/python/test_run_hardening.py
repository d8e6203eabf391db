"""Review findings of issue 12 (deliverable 4, the runtime half), each reproduced first: AIR_HOME
private even when it pre-existed with a looser mode; every attempt in a fresh node working
directory; no core dumps from processes holding secret values; preparation bounded by its own
limit; the failure summary naming a Python worker's root cause (a real torchrun worker)."""
import os
import shutil
import socket
import stat
import sys
import threading
import time

from runtime_jobs.helpers import (get, kill_run_processes, nodes_running, run_processes, submit,
                                  wait_for, wait_terminal, write_spec)


def test_air_home_is_private_even_when_it_existed_with_a_looser_mode(air, air_home, tmp_path):
    os.chmod(air_home, 0o755)
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    (code / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(code / "run.sh", 0o755)
    air("secrets", "create-scope", "s", check=True)
    air("secrets", "put-secret", "s", "k", input="value\n", check=True)
    spec = write_spec(tmp_path, "echo out; echo err >&2", nodes=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      parameters={"lr": 0.1}, secrets={"TOKEN": "s/k"})
    run = wait_terminal(air, submit(air, spec))
    assert run["state"] == "SUCCEEDED", run
    air("get", run["run_id"], check=True)
    air("logs", run["run_id"], check=True)
    loose = []
    for root, dirs, files in os.walk(air_home):
        for name in [root] + [os.path.join(root, f) for f in files]:
            mode = os.lstat(name).st_mode
            if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
                loose.append(f"{oct(stat.S_IMODE(mode))} {name}")
    assert not loose, "\n".join(loose)
    run_dir = air_home / "runs" / str(run["run_id"])
    for name in ("parameters.yaml", "supervisor.log", "attempt_0/node_0.log",
                 "attempt_0/node_0.json", "attempt_0/node_0.exit"):
        assert (run_dir / name).exists(), name  # the files the claim is about were checked


def test_every_attempt_starts_in_a_fresh_node_working_directory(air, air_home, tmp_path):
    command = """
if [ -e leftover ]; then echo "attempt $AIR_ATTEMPT sees leftover"; exit 5; fi
touch leftover
[ "$AIR_ATTEMPT" = 0 ] && exit 1
exit 0
"""
    run = wait_terminal(air, submit(air, write_spec(tmp_path, command, nodes=2, max_retries=1)))
    assert run["state"] == "SUCCEEDED", run["failure_summary"]
    assert run["attempts"] == 2


def _core_limit(pid):
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max core file size"):
            return line.split()[4:6]
    raise AssertionError("no core limit line")


def test_processes_holding_secret_values_dump_no_core(air, air_home, tmp_path):
    air("secrets", "create-scope", "s", check=True)
    air("secrets", "put-secret", "s", "k", input="value\n", check=True)
    command = 'echo "core $(ulimit -c) $(ulimit -H -c)"; sleep 30'
    run_id = submit(air, write_spec(tmp_path, command, nodes=1, secrets={"TOKEN": "s/k"}))
    try:
        run = wait_for(air, run_id, nodes_running, timeout=30)
        node = run["attempt_details"][0]["nodes"][0]
        assert _core_limit(run["supervisor_pid"]) == ["0", "0"]
        assert _core_limit(node["agent_pid"]) == ["0", "0"]
        deadline = time.monotonic() + 20
        while "core 0 0" not in air("logs", run_id, check=True).stdout:
            assert time.monotonic() < deadline, air("logs", run_id).stdout
            time.sleep(0.1)
    finally:
        air("cancel", run_id, timeout=60)
        kill_run_processes(air_home, run_id)


def test_preparation_has_its_own_time_limit(air, air_home, tmp_path, monkeypatch):
    # A package index that accepts connections and never answers: pip would wait forever.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_TIMEOUT", "600")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("AIR_TEST_MINUTE_SECONDS", "1")
    monkeypatch.setenv("AIR_PREPARE_TIMEOUT_MINUTES", "8")  # 8 s
    ran = tmp_path / "ran"
    spec = write_spec(tmp_path, f"touch {ran}", nodes=1, timeout_minutes=600,
                      environment={"dependencies": ["air-test-hanging-package==1.0"]})
    try:
        run = wait_terminal(air, submit(air, spec), timeout=120)
        assert run["state"] == "TIMED_OUT", run
        assert "AIR_PREPARE_TIMEOUT_MINUTES" in run["failure_summary"]
        assert run["attempts"] == 0 and not ran.exists()
        # No pip is left waiting on the index.
        pips = [p for p in os.listdir("/proc") if p.isdigit() and _cmd_has(p, str(air_home))]
        assert not pips, pips
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def _cmd_has(pid, needle):
    try:
        return needle.encode() in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


def test_failure_summary_names_a_torchrun_workers_root_cause(air, air_home, tmp_path,
                                                             monkeypatch):
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    assert os.path.exists(os.path.join(venv_bin, "torchrun")), venv_bin
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    code = tmp_path / "code"
    code.mkdir()
    (code / "worker.py").write_text(
        "import os, sys\n"
        "print('worker', os.environ['RANK'], 'starting', flush=True)\n"
        "import air_test_module_that_does_not_exist  # noqa\n")
    command = ("torchrun --nnodes=1 --node_rank=0 --nproc_per_node=2 "
               "--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT worker.py")
    spec = write_spec(tmp_path, command, nodes=1, per_node=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"OMP_NUM_THREADS": "1"})
    run = wait_terminal(air, submit(air, spec), timeout=240)
    assert run["state"] == "FAILED", run
    summary = run["failure_summary"]
    print(summary)
    lines = summary.splitlines()
    # The second line names the cause: the worker's exception, with torchrun's rank.
    assert lines[1].startswith("root cause"), summary
    assert ("ModuleNotFoundError: No module named 'air_test_module_that_does_not_exist'"
            in lines[1]), summary
    assert "of rank" in lines[1] and "ChildFailedError" not in lines[1], summary
    assert "root cause" in air("get", run["run_id"], check=True).stdout
