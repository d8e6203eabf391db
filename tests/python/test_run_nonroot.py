"""The runtime's core as an ordinary user (issue 33): submit, logs, retries, cancel, volumes and
secrets, run by a local user the test creates, with its own HOME and AIR_HOME, on what is for
that user a machine without mount and user namespaces (userns_off.py: the kernel refuses both,
as on login nodes where unprivileged user namespaces are off). Nothing of it runs as root but
the setup: the user gets its own copy of the air binary (the build may sit under /root, which
other users cannot enter) and jobs use the system python3 (the test venv under /root/.cache is
not theirs and no job here needs it). Also one run where that user may create a user
namespace, so /Volumes is a real mount.

The checks from outside (processes left, file owners) are made by the test, as root."""
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from conftest import AirRunner, stop_tracking_server
from local_users import SYSTEM_PYTHON, local_user
from runtime_jobs.helpers import (assert_no_processes_left, explain, get, kill_run_processes,
                                  nodes_running, submit, wait_for, wait_terminal, write_spec)

USERNS_OFF = pathlib.Path(__file__).with_name("userns_off.py")
VOL = "/Volumes/main/default/nr"
CANARY = "canary-4c1d-nonroot-secret"


@pytest.fixture(scope="module")
def user(air_bin):
    with local_user(prefix="airnr", home=True) as account:
        bin_dir = pathlib.Path(account.pw_dir) / "bin"
        bin_dir.mkdir()
        shutil.copy2(air_bin, bin_dir / "air")
        for path in (bin_dir, bin_dir / "air"):
            os.chown(path, account.pw_uid, account.pw_gid)
        yield account
        # userdel refuses a user with live processes: the tracking servers stop (SIGTERM, sent
        # by each test's teardown) before the user goes.
        deadline = time.monotonic() + 20
        while user_processes(account.pw_uid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not user_processes(account.pw_uid), "the user's processes outlived its runs"


def user_processes(uid) -> list:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = pathlib.Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith("Z"):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            found.append(int(entry))
    return found


class UserAir(AirRunner):
    """`air` as `user`, with HOME, AIR_HOME and a plain PATH only; `namespaces=False` runs it
    under userns_off.py."""

    def __init__(self, user, air_home, namespaces=False):
        super().__init__(os.path.join(user.pw_dir, "bin", "air"))
        self.user, self.air_home, self.namespaces = user, air_home, namespaces
        self.extra_env = {}

    def __call__(self, *args, input=None, timeout=120, env=None, cwd=None, check=False):
        run_env = {"HOME": self.user.pw_dir, "AIR_HOME": str(self.air_home),
                   "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **self.extra_env, **(env or {})}
        argv = [self.binary, *map(str, args)]
        kw = {}
        if self.namespaces:
            kw = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        else:
            argv = [SYSTEM_PYTHON, str(USERNS_OFF), str(self.user.pw_uid),
                    str(self.user.pw_gid), "--", *argv]
        proc = subprocess.run(argv, input=input, capture_output=True, text=True,
                              timeout=timeout, env=run_env, cwd=cwd or self.user.pw_dir, **kw)
        if check and proc.returncode != 0:
            raise AssertionError(f"air {' '.join(map(str, args))} exited {proc.returncode}\n"
                                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc


def user_dir(user, name) -> pathlib.Path:
    """A fresh directory of the user's, in its home."""
    path = pathlib.Path(user.pw_dir) / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    os.chown(path, user.pw_uid, user.pw_gid)
    return path


def give(user, *paths):
    for path in paths:
        os.chown(path, user.pw_uid, user.pw_gid)


@pytest.fixture
def work(user, request):
    """(air as the user without namespaces, its AIR_HOME, a directory of the user's)."""
    work = user_dir(user, request.node.name)
    air_home = pathlib.Path(user.pw_dir) / f".air-{request.node.name}"
    yield UserAir(user, air_home), air_home, work
    stop_tracking_server(air_home)


def dry_run_volumes(air, spec) -> dict:
    code, out = air.json("run", "-f", spec, "--dry-run")
    assert code == 0, out
    return out["data"]["volumes"]


def test_submit_logs_and_plan_without_namespaces(user, work):
    air, air_home, d = work
    spec = write_spec(d, 'echo "hello-from-nonroot $NODE_RANK uid=$(id -u)"; '
                      'echo "root=$AIR_VOLUMES_ROOT mnt=$(readlink /proc/self/ns/mnt)"',
                      name="nr", nodes=2)
    give(user, spec)
    plan = air("run", "-f", spec, "--dry-run", check=True).stdout
    assert "the spec names no /Volumes path; nodes run without a mount" in plan, plan
    assert not air_home.exists()  # a dry run writes nothing
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED" and run["attempts"] == 1, explain(run, logs)
    for node, text in logs.items():
        assert f"hello-from-nonroot {node} uid={user.pw_uid}" in text, text
        # No namespace of its own: the host's mount namespace.
        assert f"root={air_home}/volumes mnt={os.readlink('/proc/self/ns/mnt')}" in text, text
    assert run["mlflow_run_id"], run  # tracked by the user's own server
    assert f"run {run_id}  SUCCEEDED" in air("get", run_id, check=True).stdout
    assert "SUCCEEDED" in air("list", "--all-status", check=True).stdout
    assert os.stat(air_home / "runs" / str(run_id)).st_uid == user.pw_uid
    assert_no_processes_left(air_home, run)


def test_retry_then_cancel_without_namespaces(user, work):
    air, air_home, d = work
    command = ('echo "attempt $AIR_ATTEMPT"; '
               'if [ "$AIR_ATTEMPT" = 0 ]; then echo "first attempt fails"; exit 3; fi')
    spec = write_spec(d, command, nodes=1, max_retries=1)
    give(user, spec)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    assert run["state"] == "SUCCEEDED" and run["attempts"] == 2, run
    first = air("logs", run_id, "--retry", "0", check=True).stdout
    assert "attempt 0" in first and "first attempt fails" in first
    assert "attempt 1" in air("logs", run_id, check=True).stdout

    sleeper = write_spec(d, "echo started; sleep 60 & setsid sleep 61 & wait", nodes=2,
                         filename="sleep.yaml")
    give(user, sleeper)
    run_id = submit(air, sleeper)
    try:
        wait_for(air, run_id, nodes_running, timeout=30)
        proc = air("cancel", run_id, timeout=30)
        assert proc.returncode == 0 and f"run {run_id} CANCELED" in proc.stdout, proc.stderr
        run = get(air, run_id)
        assert run["state"] == "CANCELED"
        assert_no_processes_left(air_home, run)
    finally:
        kill_run_processes(air_home, run_id)


def test_volumes_without_namespaces_by_rewritten_paths(user, work):
    air, air_home, d = work
    root = air_home / "volumes"
    host_before = sorted(os.listdir("/Volumes")) if os.path.isdir("/Volumes") else None
    data = d / "input.txt"
    data.write_text("hello from the user\n")
    give(user, data)
    air("volumes", "cp", data, f"{VOL}/in/input.txt", check=True)
    command = (f'cat {VOL}/in/input.txt && mkdir -p "$OUT_DIR" && '
               'echo "node $NODE_RANK" > "$OUT_DIR/node_$NODE_RANK.txt" && '
               'grep output_dir "$HYPERPARAMETERS_PATH" && '
               'echo "mounts=$(grep -c \' /Volumes \' /proc/self/mountinfo)"')
    spec = write_spec(d, command, nodes=2, env_variables={"OUT_DIR": f"{VOL}/out"},
                      parameters={"output_dir": f"{VOL}/ckpt"})
    give(user, spec)
    volumes = dry_run_volumes(air, spec)
    assert volumes["access"] == "rewrite" and volumes["root"] == str(root), volumes
    assert "rewritten to" in volumes["detail"] and "No space left on device" in \
        volumes["detail"], volumes
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    assert run["state"] == "SUCCEEDED" and run["attempts"] == 1, explain(run, logs)
    assert "hello from the user" in logs[1] and "mounts=0" in logs[1], logs[1]
    assert f"output_dir: {root}/main/default/nr/ckpt" in logs[1], logs[1]
    out = root / "main" / "default" / "nr" / "out"
    assert (out / "node_1.txt").read_text() == "node 1\n"
    assert os.stat(out / "node_1.txt").st_uid == user.pw_uid
    code, listing = air.json("volumes", "ls", f"{VOL}/out")
    assert code == 0 and [e["name"] for e in listing["data"]["entries"]] == \
        ["node_0.txt", "node_1.txt"], listing
    # The nodes got the paths rewritten, and no mount.
    launch_file = air_home / "runs" / str(run_id) / "attempt_0" / "node_0.json"
    launch = json.loads(launch_file.read_text())
    assert ["OUT_DIR", f"{root}/main/default/nr/out"] in launch["env"], launch["env"]
    assert launch["volumes_root"] == "", launch
    now = sorted(os.listdir("/Volumes")) if os.path.isdir("/Volumes") else None
    assert now == host_before  # nothing reached the host's /Volumes

    # A root the paths cannot be rewritten to: refused at submit (and by --dry-run), naming
    # the root and what would work; nothing is stored, no attempt is made.
    odd = pathlib.Path(user.pw_dir) / "my volumes"
    env = {"AIR_VOLUMES_ROOT": str(odd)}
    for dry in (["--dry-run"], []):
        code, out = air.json("run", "-f", spec, *dry, env=env)
        assert code == 1, out
        error = out["error"]["message"]
        assert f"{spec}:5:10: command: '{VOL}/in/input.txt'" in error, error
        assert f"the volume root {odd} cannot stand in for /Volumes" in error, error
        assert "(a space is not one of" in error, error
        assert "set AIR_VOLUMES_ROOT" in error and "mount or user namespaces" in error, error
    runs = sorted(p.name for p in (air_home / "runs").iterdir())
    assert runs == [str(run_id)], runs


def test_secrets_without_namespaces(user, work):
    air, air_home, d = work
    air("secrets", "create-scope", "nr_scope", check=True)
    air("secrets", "put-secret", "nr_scope", "token", input=CANARY + "\n", check=True)
    spec = write_spec(d, f'echo "token=$TOKEN"; printf "%s" "$TOKEN" > {d}/seen_$NODE_RANK',
                      nodes=2, secrets={"TOKEN": "nr_scope/token"})
    give(user, spec)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    assert run["state"] == "SUCCEEDED", run
    for node in (0, 1):
        assert (d / f"seen_{node}").read_text() == CANARY
        logs = air("logs", run_id, "--node", node, check=True).stdout
        assert "token=[REDACTED]" in logs and CANARY not in logs
    for root, _, files in os.walk(air_home):
        for name in files:
            assert CANARY.encode() not in pathlib.Path(root, name).read_bytes(), name


def test_volumes_through_a_user_namespace(user, tmp_path, request):
    """Where the user may create a user namespace, /Volumes is a mount (with a secret in the
    spec, whose supervisor turns core dumps off). The host's /Volumes is the empty mount point
    an administrator (here the test, as root) made once."""
    os.makedirs("/Volumes", exist_ok=True)
    air_home = pathlib.Path(user.pw_dir) / ".air-userns"
    air = UserAir(user, air_home, namespaces=True)
    d = user_dir(user, "userns")
    try:
        air("secrets", "create-scope", "s", check=True)
        air("secrets", "put-secret", "s", "k", input="v\n", check=True)
        command = ('mkdir -p "$(dirname "$OUT")" && echo written > "$OUT" && '
                   'echo "mounts=$(grep -c \' /Volumes \' /proc/self/mountinfo)"')
        spec = write_spec(d, command, nodes=1, secrets={"K": "s/k"},
                          env_variables={"OUT": f"{VOL}/userns/out.txt"})
        give(user, spec)
        run_id = submit(air, spec)
        run = wait_terminal(air, run_id)
        logs = air("logs", run_id).stdout
        assert run["state"] == "SUCCEEDED" and run["attempts"] == 1, explain(run, {0: logs})
        volumes = dry_run_volumes(air, spec)
        # Whichever way this machine allows, the plan said it and the node got it.
        expected = {"mount": "mounts=1", "rewrite": "mounts=0"}[volumes["access"]]
        assert expected in logs, (volumes, logs)
        out = air_home / "volumes" / "main" / "default" / "nr" / "userns" / "out.txt"
        assert out.read_text() == "written\n"
        assert not os.path.exists("/Volumes/main")
    finally:
        stop_tracking_server(air_home)
