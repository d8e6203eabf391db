"""End-to-end tests of `air run` on the embedded local backend with the real binary: the run id
returned at once, the per-node environment, snapshots, parameters, `air get/list/logs` (text
and JSON), idempotency, and the store's event trail."""
import json
import os
import sqlite3
import stat
import subprocess
import time

import pytest
import yaml

from runtime_jobs.helpers import (assert_no_processes_left, get, submit, wait_terminal,
                                  write_spec)

ENV_DUMP = """
python3 - <<'EOF'
import json, os
keys = ["NUM_NODES", "NODE_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "CODE_SOURCE_PATH", "HYPERPARAMETERS_PATH", "MLFLOW_RUN_ID",
        "MLFLOW_EXPERIMENT_NAME", "AIR_RUN_ID", "AIR_ATTEMPT", "PYTHONUNBUFFERED", "GREETING",
        "CUDA_VISIBLE_DEVICES"]
env = {k: os.environ.get(k) for k in keys}
env["cwd"] = os.getcwd()
env["code"] = open("train.py").read()
env["params"] = open(os.environ["HYPERPARAMETERS_PATH"]).read()
print("ENV " + json.dumps(env))
EOF
"""


def node_env(air, run_id, node):
    proc = air("logs", run_id, "--node", node, check=True)
    line = next(l for l in proc.stdout.splitlines() if l.startswith("ENV "))
    return json.loads(line[4:])


def test_submit_returns_id_and_nodes_get_the_torchrun_environment(air, air_home, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('v1')\n")
    (code / ".gitignore").write_text("*.ckpt\n")
    (code / "big.ckpt").write_text("x" * 1000)
    # The nodes wait for a file the test writes only once `air run` has returned: a submit that
    # waited for its run would never return (the test would time out).
    go = tmp_path / "go"
    spec = write_spec(tmp_path, f"while [ ! -e {go} ]; do sleep 0.05; done\n" + ENV_DUMP,
                      name="env-check", nodes=2, per_node=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"GREETING": "hello"},
                      parameters={"lr": 0.001, "layers": [1, 2]})
    run_id = submit(air, spec)
    assert get(air, run_id)["state"] not in ("SUCCEEDED", "FAILED")  # it waits for `go`
    (code / "train.py").write_text("print('edited after submit')\n")
    go.touch()
    run = wait_terminal(air, run_id)
    assert run["state"] == "SUCCEEDED", run
    envs = [node_env(air, run_id, n) for n in range(2)]
    port = run["attempt_details"][0]["master_port"]
    for rank, env in enumerate(envs):
        assert env["NUM_NODES"] == "2"
        assert env["NODE_RANK"] == str(rank)
        assert env["LOCAL_WORLD_SIZE"] == "2"
        assert env["WORLD_SIZE"] == "4"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["MASTER_PORT"] == str(port)
        assert env["AIR_RUN_ID"] == str(run_id)
        assert env["AIR_ATTEMPT"] == "0"
        assert env["PYTHONUNBUFFERED"] == "1"
        assert env["GREETING"] == "hello"
        assert env["MLFLOW_RUN_ID"] == run["mlflow_run_id"]
        assert env["MLFLOW_EXPERIMENT_NAME"] == "env-check"
        assert env["CODE_SOURCE_PATH"] == env["cwd"]
        assert env["CODE_SOURCE_PATH"].startswith(str(air_home / "runs" / str(run_id)))
        assert env["code"] == "print('v1')\n"  # the snapshot taken at submit
        assert yaml.safe_load(env["params"]) == {"lr": 0.001, "layers": [1, 2]}
        assert env["CUDA_VISIBLE_DEVICES"] is None  # CPU shape
    assert envs[0]["CODE_SOURCE_PATH"] != envs[1]["CODE_SOURCE_PATH"]  # own directory each
    node_dir = envs[0]["CODE_SOURCE_PATH"]
    assert not os.path.exists(os.path.join(node_dir, "big.ckpt"))  # .gitignore honored
    mode = os.stat(os.path.join(node_dir, "train.py")).st_mode
    assert stat.S_IMODE(mode) & 0o222 == 0  # read-only
    assert_no_processes_left(air_home, run)


def test_no_parameters_means_no_hyperparameters_path(air, tmp_path):
    spec = write_spec(tmp_path, 'echo "HP=${HYPERPARAMETERS_PATH-unset} CS=$CODE_SOURCE_PATH"',
                      nodes=1)
    run_id = submit(air, spec)
    assert wait_terminal(air, run_id)["state"] == "SUCCEEDED"
    out = air("logs", run_id, check=True).stdout
    assert "HP=unset" in out
    assert "CS=/" in out  # a working directory exists even without code_source


def test_get_list_and_logs_in_text_and_json(air, air_home, tmp_path):
    spec = write_spec(tmp_path, 'for i in 1 2 3 4 5; do echo "node $NODE_RANK line $i"; done; '
                      'echo "to stderr" >&2', name="views-exp", nodes=2)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    assert run["state"] == "SUCCEEDED"
    assert run["experiment"] == "views-exp"
    assert run["num_nodes"] == 2 and run["attempts"] == 1
    assert run["duration_s"] > 0

    text = air("get", run_id, check=True).stdout
    assert f"run {run_id}  SUCCEEDED" in text and "views-exp" in text
    seed_form = air("get", "run", run_id, check=True).stdout
    assert seed_form == text

    logs = air("logs", run_id, "--node", "1", check=True).stdout.splitlines()
    assert logs[:6] == [f"node 1 line {i}" for i in range(1, 6)] + ["to stderr"]
    tail = air("logs", run_id, "--node", "0", "--lines", "2", check=True).stdout.splitlines()
    assert len(tail) == 2
    code, env = air.json("logs", run_id, "--node", "1", "--timestamps")
    assert code == 0
    lines = env["data"]["lines"]
    assert lines[0]["stream"] == "out" and lines[0]["text"] == "node 1 line 1"
    assert any(l["stream"] == "err" and l["text"] == "to stderr" for l in lines)
    assert lines[0]["ts"].endswith("Z")
    stamped = air("logs", run_id, "--timestamps", check=True).stdout.splitlines()[0]
    assert stamped.split(" ", 2)[1] == "out"

    assert air("list", check=True).stdout.startswith("no runs")  # only live runs by default
    listed = air("list", "--all-status", check=True).stdout
    assert "views-exp" in listed and "SUCCEEDED" in listed
    code, env = air.json("list", "--all-status", "--filter", "experiment=views-*")
    assert [r["run_id"] for r in env["data"]["runs"]] == [run_id]
    code, env = air.json("list", "--all-status", "--filter", "experiment=other*")
    assert env["data"]["runs"] == []
    code, env = air.json("list", "--all-status", "--filter", "state=FAILED")
    assert env["data"]["runs"] == []
    for typed in ("succeeded", "SUCCESS"):  # any case; the seed system's name
        code, env = air.json("list", "--filter", f"state={typed}")
        assert [r["run_id"] for r in env["data"]["runs"]] == [run_id], typed
    code, env = air.json("list", "--filter", "state=SUCEEDED")
    assert code == 2 and "did you mean 'SUCCEEDED'" in env["error"]["message"]
    code, env = air.json("logs", run_id, "--minutes", "-1")
    assert code == 2 and "--minutes" in env["error"]["message"]

    dest = tmp_path / "downloaded"
    air("logs", run_id, "--download-to", dest, check=True)
    got = (dest / f"run_{run_id}" / "attempt_0" / "node_1.log").read_text()
    assert "node 1 line 5" in got


def test_output_that_is_not_utf8_is_shown_in_json_without_a_crash(air, tmp_path):
    # A worker's binary output (invalid UTF-8, NUL, no final newline) ends up in the log, the
    # failure summary and the --watch stream; every JSON view shows it with U+FFFD.
    command = r"printf 'caf\xe9 \xff\xfe end\n'; printf 'no newline at the end'; exit 4"
    spec = write_spec(tmp_path, command, nodes=1)
    watch = air("-o", "json", "run", "-f", spec, "--watch", timeout=60)
    assert watch.returncode == 1, watch.stderr
    envelopes = [json.loads(line) for line in watch.stdout.splitlines()]
    run_id = envelopes[0]["data"]["run_id"]
    texts = [e["data"]["text"] for e in envelopes if "data" in e and "text" in e["data"]]
    assert "caf\ufffd \ufffd\ufffd end" in texts
    assert "node 0 exited with code 4" in envelopes[-1]["error"]["message"]
    code, env = air.json("logs", run_id)
    assert code == 0, env
    assert [l["text"] for l in env["data"]["lines"] if l["stream"] == "out"] == [
        "caf\ufffd \ufffd\ufffd end", "no newline at the end"]
    code, env = air.json("get", run_id)
    assert code == 0, env
    assert "caf\ufffd" in env["data"]["failure_summary"]


def test_list_limit_counts_live_runs_after_dead_supervisors_are_noticed(air, air_home,
                                                                        tmp_path):
    live = submit(air, write_spec(tmp_path, "sleep 30", nodes=1))
    try:
        assert get(air, live)["state"] in ("PENDING", "RUNNING")
        # 30 newer runs that look live, but whose supervisor is gone (kill -9, a reboot).
        gone = subprocess.Popen(["true"])
        gone.wait()
        db = sqlite3.connect(air_home / "air.db")
        columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")
                   if r[1] not in ("id", "idempotency_token", "supervisor_pid", "state")]
        names = ", ".join(columns)
        for _ in range(30):
            db.execute(f"INSERT INTO runs ({names}, supervisor_pid, state) "
                       f"SELECT {names}, ?, 'RUNNING' FROM runs WHERE id = ?", (gone.pid, live))
        db.commit()
        db.close()
        code, env = air.json("list", "--limit", "3")
        assert code == 0, env
        assert [r["run_id"] for r in env["data"]["runs"]] == [live]
        code, env = air.json("list", "--all-status", "--filter", "state=INTERNAL_ERROR",
                             "--limit", "100")
        assert len(env["data"]["runs"]) == 30
    finally:
        air("cancel", live, timeout=30)


@pytest.mark.parametrize("close_range", ["close_range", "fallback"])
def test_the_run_keeps_no_file_descriptor_of_its_submitter(air_bin, air, tmp_path, close_range):
    # Whoever calls `air run` may hold a pipe open in it (a CI step waiting for EOF, make's
    # jobserver): the detached run must not keep it open, and the command gets fds 0-2 only.
    # Also where the kernel lacks close_range(CLOSE_RANGE_CLOEXEC): the fallback, forced.
    go = tmp_path / "go"  # the node runs until the test writes it
    spec = write_spec(tmp_path, f"ls /proc/self/fd; while [ ! -e {go} ]; do sleep 0.05; done",
                      nodes=1)
    env = dict(os.environ)
    if close_range == "fallback":
        env["AIR_TEST_NO_CLOSE_RANGE"] = "1"
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.run([air_bin, "run", "-f", spec], pass_fds=(write_end,),
                              capture_output=True, text=True, timeout=30, env=env)
        assert proc.returncode == 0, proc.stderr
        os.close(write_end)
        write_end = -1
        os.set_blocking(read_end, False)
        # EOF while the run still runs: none of its processes holds the write end. (A bound
        # far past the supervisor's start: a run that held the pipe would hold it until `go`.)
        deadline = time.monotonic() + 60
        while True:
            try:
                assert os.read(read_end, 1) == b""  # EOF: nobody holds the write end
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the run holds the submitter's pipe open"
                time.sleep(0.02)
        assert get(air, int(proc.stdout))["state"] not in ("SUCCEEDED", "FAILED")
    finally:
        go.touch()
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    run = wait_terminal(air, int(proc.stdout))
    assert run["state"] == "SUCCEEDED"
    out = air("logs", run["run_id"], check=True).stdout.splitlines()
    assert [l for l in out if not l.startswith("[air]")] == ["0", "1", "2", "3"], out  # 3: ls's


def test_cli_errors_name_what_is_valid(air, tmp_path):
    code, env = air.json("get", "abc")
    assert code == 2 and "abc" in env["error"]["message"]
    code, env = air.json("get", "7")
    assert code == 1 and env["error"]["code"] == "not_found"
    spec = write_spec(tmp_path, "echo hi", nodes=2)
    run_id = submit(air, spec)
    wait_terminal(air, run_id)
    code, env = air.json("get", "99")
    assert code == 1 and "99" in env["error"]["message"]
    code, env = air.json("logs", run_id, "--node", "5")
    assert code == 2 and "0..1" in env["error"]["message"]
    code, env = air.json("logs", run_id, "--retry", "3")
    assert code == 2 and "1 attempt" in env["error"]["message"]
    code, env = air.json("list", "--filter", "colour=red")
    assert code == 2 and "experiment" in env["error"]["message"]
    proc = air("list", "--filter", "state=DONE")
    assert proc.returncode == 2 and "SUCCEEDED" in proc.stderr
    proc = air("cancel")
    assert proc.returncode == 2


def test_idempotency_token_returns_the_existing_run(air, tmp_path):
    spec = write_spec(tmp_path, "echo once", nodes=1, idempotency_token="nightly-2026-11-30")
    first = submit(air, spec)
    second = air("run", "-f", spec, check=True)
    assert int(second.stdout.strip()) == first
    assert "idempotency_token" in second.stderr
    code, env = air.json("run", "-f", spec)
    assert env["data"] == {**env["data"], "run_id": first, "created": False}
    wait_terminal(air, first)
    code, env = air.json("list", "--all-status")
    assert len(env["data"]["runs"]) == 1


def test_every_transition_is_an_event_with_a_timestamp(air, air_home, tmp_path):
    spec = write_spec(tmp_path, "echo hi", nodes=2)
    run_id = submit(air, spec)
    wait_terminal(air, run_id)
    db = sqlite3.connect(air_home / "air.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = db.execute("SELECT kind, from_state, to_state, ts_us FROM events WHERE run_id = ? "
                      "ORDER BY id", (run_id,)).fetchall()
    states = [(f, t) for kind, f, t, _ in rows if kind == "state"]
    assert states == [(None, "PENDING"), ("PENDING", "RUNNING"), ("RUNNING", "SUCCEEDED")]
    stamps = [ts for *_, ts in rows]
    assert stamps == sorted(stamps) and all(ts > 0 for ts in stamps)
    node_events = [r for r in rows if r[0] == "node"]
    assert len(node_events) == 4  # each node started and ended


def test_watch_streams_node_zero_and_exit_code_follows_the_outcome(air, tmp_path):
    ok = write_spec(tmp_path, 'echo "hello from $NODE_RANK"', nodes=2, filename="ok.yaml")
    proc = air("run", "-f", ok, "--watch", timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].isdigit()
    assert "hello from 0" in lines and "hello from 1" not in lines
    assert "SUCCEEDED" in proc.stderr

    bad = write_spec(tmp_path, 'echo "failing"; exit 4', nodes=1, filename="bad.yaml")
    proc = air("run", "-f", bad, "--watch", timeout=60)
    assert proc.returncode == 1
    assert "failing" in proc.stdout
    assert "FAILED" in proc.stderr and "exited with code 4" in proc.stderr

    code_proc = air("-o", "json", "run", "-f", bad, "--watch", timeout=60)
    envelopes = [json.loads(l) for l in code_proc.stdout.splitlines()]
    assert envelopes[0]["data"]["run_id"] > 0
    assert any(e.get("data", {}).get("text") == "failing" for e in envelopes)
    assert envelopes[-1]["error"]["run"]["state"] == "FAILED"


def test_watch_node_streams_the_requested_node(air, air_home, tmp_path):
    spec = write_spec(tmp_path, 'echo "hello from $NODE_RANK"', nodes=2)
    proc = air("run", "-f", spec, "--watch", "--node", "1", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "hello from 1" in proc.stdout.splitlines()
    assert "hello from 0" not in proc.stdout
    assert "streaming node 1" in proc.stderr

    def run_ids():
        listed = json.loads(air("-o", "json", "list", "--all-status", check=True).stdout)
        return [r["run_id"] for r in listed["data"]["runs"]]

    runs_before = run_ids()
    proc = air("run", "-f", spec, "--watch", "--node", "2", timeout=60)
    assert proc.returncode == 2
    assert "--node 2: the run has 2 node(s); valid: 0..1" in proc.stderr
    assert run_ids() == runs_before

    proc = air("run", "-f", spec, "--node", "1", timeout=60)
    assert proc.returncode == 2 and "--watch" in proc.stderr


def test_gpu_nodes_get_disjoint_cuda_visible_devices(air, tmp_path, monkeypatch):
    # The local backend hands out the GPUs the caller may use: CUDA_VISIBLE_DEVICES when set.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    spec = write_spec(tmp_path, 'echo "GPUS=$CUDA_VISIBLE_DEVICES"', nodes=1)
    data = yaml.safe_load(spec.read_text())
    data["compute"] = {"accelerator_type": "GPU_1xH100", "num_accelerators": 2}
    spec.write_text(yaml.safe_dump(data))
    run_id = submit(air, spec)
    assert wait_terminal(air, run_id)["state"] == "SUCCEEDED"
    assert "GPUS=3" in air("logs", run_id, "--node", 0, check=True).stdout
    assert "GPUS=5" in air("logs", run_id, "--node", 1, check=True).stdout


def test_a_gpu_shape_the_host_cannot_give_is_refused_at_submit(air, air_home, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    spec = tmp_path / "train.yaml"
    spec.write_text("experiment_name: too-big\n"
                    "compute:\n"
                    "  num_accelerators: 16\n"
                    "  accelerator_type: GPU_8xH100\n"
                    "command: echo hi\n")
    proc = air("run", "-f", spec)
    assert proc.returncode == 2
    assert f"{spec}:4:" in proc.stderr  # FILE:LINE:COL of accelerator_type
    assert "16 GPU" in proc.stderr and "CPU_<n>" in proc.stderr
    assert not (air_home / "runs").exists()  # nothing was created
    assert not (air_home / "air.db").exists()


def test_logs_follow_streams_a_live_node_until_the_run_ends(air, tmp_path):
    command = 'for i in 1 2 3 4 5; do echo "tick $i"; sleep 0.2; done'
    run_id = submit(air, write_spec(tmp_path, command, nodes=2))
    proc = air("logs", run_id, "--node", "1", "--follow", timeout=60)
    assert proc.returncode == 0, proc.stderr
    ticks = [l for l in proc.stdout.splitlines() if l.startswith("tick")]
    assert ticks == [f"tick {i}" for i in range(1, 6)]
    assert get(air, run_id)["state"] == "SUCCEEDED"


def _cpu_list(text: str) -> set:
    """The CPUs of a Cpus_allowed_list value such as `0-3,6`."""
    cpus = set()
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def test_each_simulated_node_runs_on_its_own_share_of_the_cpus(air, air_home, tmp_path):
    """As a real node has its own cores, each local node (its agent, command and every process
    it starts) is bound to a disjoint part of the CPUs air may use; with fewer CPUs than
    nodes, none is bound."""
    spec = write_spec(tmp_path, "grep Cpus_allowed_list /proc/self/status; "
                      "sh -c 'grep Cpus_allowed_list /proc/self/status'", nodes=2)
    run = wait_terminal(air, submit(air, spec))
    assert run["state"] == "SUCCEEDED", run
    mine = sorted(os.sched_getaffinity(0))
    shares = []
    for node in range(2):
        lines = [l for l in air("logs", run["run_id"], "--node", node, check=True)
                 .stdout.splitlines() if l.startswith("Cpus_allowed_list:")]
        assert len(lines) == 2 and lines[0] == lines[1], lines  # the child keeps the node's
        shares.append(_cpu_list(lines[0].split(":", 1)[1]))
    print("allowed", mine, "nodes", shares)
    if len(mine) >= 2:
        half = len(mine) // 2
        assert shares == [set(mine[:half]), set(mine[half:])], (mine, shares)
    else:
        assert shares == [set(mine), set(mine)], (mine, shares)
