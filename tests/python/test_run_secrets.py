"""Secrets at launch, from the runtime's side: resolved before any node starts and injected only
into the node processes' environment; the node logs hold [REDACTED] (even for a value split
across two writes); nothing under AIR_HOME and no process's argv holds the value; a missing
secret fails the run before launch, naming scope/key."""
import os

from runtime_jobs.helpers import submit, wait_terminal, write_spec

CANARY = "canary-7f3e9b21-secret-value"


def test_secret_reaches_the_command_only_through_its_environment(air, air_home, tmp_path):
    air("secrets", "create-scope", "my_scope", check=True)
    air("secrets", "put-secret", "my_scope", "hf_token", input=CANARY + "\n", check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    command = (f'echo "token=$HF_TOKEN"; echo "err $HF_TOKEN" >&2; '
               f'printf "%s" "${{HF_TOKEN:0:10}}"; sleep 0.2; echo "${{HF_TOKEN:10}}"; '
               f'printf "%s" "$HF_TOKEN" > {outside}/node_$NODE_RANK; '
               f'cat /proc/$$/cmdline > {outside}/cmdline_$NODE_RANK')
    spec = write_spec(tmp_path, command, nodes=2, secrets={"HF_TOKEN": "my_scope/hf_token"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    assert run["state"] == "SUCCEEDED", run
    for node in (0, 1):
        assert (outside / f"node_{node}").read_text() == CANARY  # the real value, in the node
        assert CANARY.encode() not in (outside / f"cmdline_{node}").read_bytes()
        logs = air("logs", run_id, "--node", node, check=True).stdout
        assert "token=[REDACTED]" in logs and "err [REDACTED]" in logs
        assert CANARY not in logs and CANARY[:10] not in logs
    for root, _, files in os.walk(air_home):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert CANARY.encode() not in f.read(), os.path.join(root, name)


def test_a_missing_secret_fails_before_launch_naming_scope_and_key(air, air_home, tmp_path):
    ran = tmp_path / "ran"
    spec = write_spec(tmp_path, f"touch {ran}", nodes=1,
                      secrets={"HF_TOKEN": "nope_scope/hf_token"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    assert run["state"] == "FAILED"
    assert run["attempts"] == 0 and not ran.exists()
    assert "nope_scope/hf_token" in run["failure_summary"]
    assert "HF_TOKEN" in run["failure_summary"]
