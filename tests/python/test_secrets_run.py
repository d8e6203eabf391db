"""Secrets in real runs: a canary secret reaches the nodes' environment and nowhere else.

A 2-node local run whose command echoes the canary to stdout and stderr (also split across two
writes, and a multi-line secret) and writes it to a file outside AIR_HOME. The file must hold
the real value; no byte sequence of the canary may appear anywhere under AIR_HOME (database,
WAL, logs, launch files, run directory), in any CLI output (text and JSON: run --dry-run,
run --watch, get, logs, list, failure summaries), or in /proc/*/cmdline of any process while
the run is live. A missing secret fails the run before any command starts, naming scope/key.
"""
import json
import os
import pathlib
import secrets
import subprocess
import time

import pytest


def _workload(path: pathlib.Path, command: str, secrets_map: dict, nodes=2) -> pathlib.Path:
    lines = ["experiment_name: secrets-canary", "compute:", "  accelerator_type: CPU_1",
             f"  num_accelerators: {nodes}", "command: |"]
    lines += ["  " + line for line in command.strip().splitlines()]
    lines += ["secrets:"] + [f"  {name}: {ref}" for name, ref in secrets_map.items()]
    lines += ["max_retries: 0", "timeout_minutes: 5"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _put(air_bin, scope, key, value: str):
    proc = subprocess.run([air_bin, "secrets", "put-secret", scope, key], input=value.encode(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def _cmdlines():
    """{pid: cmdline bytes} of every process we can see right now."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out[int(entry)] = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                pass
    return out


def _grep_tree(root: pathlib.Path, needles):
    """Files under root whose bytes contain any needle."""
    hits = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = pathlib.Path(dirpath) / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            hits += [f"{path}: {n!r}" for n in needles if n in data]
    return hits


def _cli_outputs(air, run_id):
    """Everything the read-side CLI prints about a run, text and JSON, stdout and stderr."""
    outputs = []
    for args in (["get", run_id], ["get", "run", run_id], ["logs", run_id],
                 ["logs", run_id, "--node", "1"], ["logs", run_id, "--node", "0", "--retry", "-1"],
                 ["list", "--all-status"]):
        for prefix in ([], ["-o", "json"]):
            proc = air(*prefix, *args)
            outputs.append((args, proc.returncode, proc.stdout + proc.stderr))
    return outputs


@pytest.fixture
def canary():
    return "CANARY" + secrets.token_hex(10)


def test_canary_reaches_nodes_only(air, air_bin, air_home, tmp_path, canary):
    pem_line = "PEMLINE" + secrets.token_hex(10)
    pem = f"-----BEGIN TEST KEY-----\n{pem_line}\n-----END TEST KEY-----"
    assert air("secrets", "create-scope", "my_scope").returncode == 0
    _put(air_bin, "my_scope", "hf_token", canary + "\n")  # echo-style: the newline is stripped
    _put(air_bin, "my_scope", "pem", pem)
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = "proc-marker-" + secrets.token_hex(4)  # finds this run's shells in /proc
    spec = _workload(tmp_path / "canary.yaml", f"""
# {marker}
echo "stdout says $HF_TOKEN"
echo "stderr says $HF_TOKEN" >&2
printf '%s' "$HF_TOKEN" > {outside}/node_$NODE_RANK.txt
printf 'split:%s' "${{HF_TOKEN:0:11}}"; sleep 0.3; printf '%s:end\\n' "${{HF_TOKEN:11}}"
echo "pem follows"; printf '%s\\n' "$PEM"
echo "inline $HF_TOKEN and $HF_TOKEN$HF_TOKEN twice" >&2
sleep 2.5
""", {"HF_TOKEN": "my_scope/hf_token", "PEM": "my_scope/pem"})
    needles = [canary.encode(), pem_line.encode(), canary[:12].encode()]

    dry = air("run", "-f", spec, "--dry-run")
    dry_json = air("-o", "json", "run", "-f", spec, "--dry-run")
    assert dry.returncode == 0 and dry_json.returncode == 0
    assert "HF_TOKEN=[REDACTED]" in dry.stdout

    watch = subprocess.Popen([air_bin, "run", "-f", str(spec), "--watch"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    seen_agents, seen_shells, cmdline_hits = set(), set(), []
    while watch.poll() is None:
        for pid, cmdline in _cmdlines().items():
            if any(n in cmdline for n in needles):
                cmdline_hits.append((pid, cmdline))
            if b"agent" in cmdline and str(air_home).encode() in cmdline:
                seen_agents.add(pid)
            if marker.encode() in cmdline:
                seen_shells.add(pid)
        time.sleep(0.05)
    watch_out, watch_err = watch.communicate(timeout=60)
    assert watch.returncode == 0, watch_err.decode()
    assert not cmdline_hits, cmdline_hits
    # The scan really saw the run: both agents and both nodes' shells.
    assert len(seen_agents) >= 2 and len(seen_shells) >= 2, (seen_agents, seen_shells)

    # The nodes got the real values.
    for rank in (0, 1):
        assert (outside / f"node_{rank}.txt").read_text() == canary

    run_id = watch_out.decode().split()[0]  # `air run` prints the run id first
    assert run_id.isdigit(), watch_out
    outputs = _cli_outputs(air, run_id)
    printed = watch_out + watch_err + (dry.stdout + dry.stderr + dry_json.stdout).encode()
    printed += "".join(text for _, _, text in outputs).encode()
    assert not [n for n in needles if n in printed], "a CLI output holds the canary"
    assert not _grep_tree(air_home, needles)

    # What was redacted, and how.
    logs = air("logs", run_id, "--node", "1").stdout
    assert "stdout says [REDACTED]" in logs
    assert "stderr says [REDACTED]" in logs
    assert "split:[REDACTED]:end" in logs  # the value arrived in two writes
    assert "inline [REDACTED] and [REDACTED][REDACTED] twice" in logs
    assert "pem follows" in logs and "BEGIN TEST KEY" not in logs
    rc, env = air.json("logs", run_id, "--node", "0")
    texts = [line["text"] for line in env["data"]["lines"]]
    assert "stderr says [REDACTED]" in texts and "split:[REDACTED]:end" in texts
    assert "stdout says [REDACTED]" in watch_out.decode()


def test_failure_summary_of_a_node_printing_the_secret_is_redacted(air, air_bin, air_home,
                                                                     tmp_path, canary):
    assert air("secrets", "create-scope", "s").returncode == 0
    _put(air_bin, "s", "token", canary)
    spec = _workload(tmp_path / "fail.yaml", """
echo "connecting with $TOKEN"
echo "auth failed for token=$TOKEN" >&2
exit 3
""", {"TOKEN": "s/token"})
    watch = air("run", "-f", spec, "--watch")
    assert watch.returncode != 0
    run_id = watch.stdout.split()[0]
    assert run_id.isdigit(), watch.stdout
    rc, env = air.json("get", run_id)
    assert env["data"]["state"] == "FAILED"
    summary = env["data"]["failure_summary"]
    assert "exited with code 3" in summary and "[REDACTED]" in summary, summary
    text = air("get", run_id).stdout
    assert "auth failed for token=[REDACTED]" in text
    printed = watch.stdout + watch.stderr + json.dumps(env) + text
    printed += "".join(t for _, _, t in _cli_outputs(air, run_id))
    assert canary not in printed
    assert not _grep_tree(air_home, [canary.encode()])


def test_missing_secret_fails_before_launch_naming_scope_and_key(air, air_bin, air_home,
                                                                  tmp_path, canary):
    assert air("secrets", "create-scope", "my_scope").returncode == 0
    _put(air_bin, "my_scope", "present", canary)
    started = tmp_path / "started"
    spec = _workload(tmp_path / "missing.yaml", f"touch {started}\necho $OK $HF_TOKEN",
                     {"OK": "my_scope/present", "HF_TOKEN": "my_scope/hf_token",
                      "DB_PASSWORD": "no_such_scope/password"})
    watch = air("run", "-f", spec, "--watch")
    assert watch.returncode != 0
    run_id = watch.stdout.split()[0]
    assert run_id.isdigit(), watch.stdout
    rc, env = air.json("get", run_id)
    data = env["data"]
    assert data["state"] == "FAILED"
    summary = data["failure_summary"]
    assert "HF_TOKEN -> my_scope/hf_token (scope 'my_scope' has no key 'hf_token')" in summary
    assert "DB_PASSWORD -> no_such_scope/password (scope 'no_such_scope' does not exist)" in summary
    assert "no command was started" in summary
    assert canary not in watch.stdout + watch.stderr + json.dumps(env)
    assert "my_scope/hf_token" in watch.stderr
    assert not started.exists(), "a node command ran although a secret was missing"
    assert data["attempts"] == 0
    assert not _grep_tree(air_home, [canary.encode()])


def test_air_home_inside_the_snapshot_root_keeps_key_and_store_out(air_bin, tmp_path, canary):
    """AIR_HOME inside the project a snapshot copies (root_path: .): the key and the store
    together would hold every value, so neither may reach the snapshot or a node's directory."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('train')\n")
    home = project / ".air"
    env = dict(os.environ, AIR_HOME=str(home))

    def run_air(*args, **kw):
        return subprocess.run([air_bin, *map(str, args)], capture_output=True, text=True,
                              env=env, cwd=project, timeout=120, **kw)

    assert run_air("secrets", "create-scope", "s").returncode == 0
    assert run_air("secrets", "put-secret", "s", "t", input=canary).returncode == 0
    key = (home / "secrets" / "key").read_bytes()
    (project / "job.yaml").write_text("\n".join([
        "experiment_name: snapshot-holds-home", "compute:", "  accelerator_type: CPU_1",
        "  num_accelerators: 1", "code_source:", "  type: snapshot", "  snapshot:",
        "    root_path: .", "command: find . -type f | sort", "secrets:", "  T: s/t",
        "max_retries: 0"]) + "\n")
    watch = run_air("run", "-f", "job.yaml", "--watch")
    assert watch.returncode == 0, watch.stderr
    assert "./train.py" in watch.stdout and "./job.yaml" in watch.stdout  # a real snapshot
    assert "secrets/" not in watch.stdout, watch.stdout
    # No copy of the key or the store anywhere else under AIR_HOME (snapshot blobs, node dirs).
    store = (home / "secrets" / "store").read_bytes()
    hits = [h for h in _grep_tree(home, [key, store[:64]]) if "/secrets/" not in h]
    assert not hits, hits


def test_a_value_too_long_for_an_environment_variable_fails_before_launch(air, air_bin,
                                                                           air_home, tmp_path):
    """128 KiB can be stored, but Linux caps NAME=VALUE at 128 KiB with '=' and NUL: the run
    must fail before launch naming the variable, not lose its nodes to E2BIG."""
    assert air("secrets", "create-scope", "s").returncode == 0
    value = "V" * (128 * 1024)
    _put(air_bin, "s", "big", value)
    started = tmp_path / "started"
    spec = _workload(tmp_path / "big.yaml", f"touch {started}", {"BIG_TOKEN": "s/big"}, nodes=1)
    watch = air("run", "-f", spec, "--watch")
    assert watch.returncode != 0
    run_id = watch.stdout.split()[0]
    rc, env = air.json("get", run_id)
    data = env["data"]
    assert data["state"] == "FAILED" and data["attempts"] == 0, data
    summary = data["failure_summary"]
    assert "too long to pass as an environment variable" in summary, summary
    assert "BIG_TOKEN -> s/big (131072 bytes; at most 131061 for this variable)" in summary
    assert not started.exists()
    assert "V" * 64 not in watch.stdout + watch.stderr + json.dumps(env)
