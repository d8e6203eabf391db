"""Issue 33, probes 4 and 5 and the small ones: directories and files another local user could
prepare in advance. An AIR_HOME or shared_root created by another user is refused (the error
names the path, its owner and mode) and a token planted in it is never served; a symlink
planted where a node log goes is not followed; `air volumes cp` copies into a volume's folder as
docs/volumes.md shows. The other user is real (tests/python/local_users.py)."""
import os
import pathlib
import shutil
import stat
import subprocess
import uuid

import pytest

from local_users import local_user, run_as
from runtime_jobs.helpers import wait_terminal, write_spec

PLANTED_TOKEN = "f" * 64


@pytest.fixture
def attacker():
    with local_user("airplant") as user:
        yield user


def plant_dir(user, path: pathlib.Path, mode=0o777, token=False):
    """`path` created by `user` (mode `mode`), with a tracking/server.token when `token`."""
    proc = run_as(user, f"""
        import os
        os.umask(0)
        os.mkdir({str(path)!r}, {mode:#o})
        if {token!r}:
            os.mkdir({str(path / 'tracking')!r}, 0o777)
            fd = os.open({str(path / 'tracking' / 'server.token')!r},
                         os.O_WRONLY | os.O_CREAT, 0o777)
            os.write(fd, b{PLANTED_TOKEN!r} + b"\\n")
            os.close(fd)
    """)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def planted_path():
    path = pathlib.Path(f"/tmp/air-planted-{uuid.uuid4().hex[:8]}")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def assert_names_owner(proc, path, user, mode):
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    message = proc.stderr
    assert str(path) in message, message
    assert f"belongs to {user.pw_name} (uid {user.pw_uid})" in message, message
    assert f"mode {mode:04o}" in message, message
    assert "must be a directory owned by you" in message, message


def test_an_air_home_another_user_planted_is_refused_and_its_token_never_served(
        air_bin, attacker, planted_path, tmp_path):
    plant_dir(attacker, planted_path, token=True)
    env = dict(os.environ, AIR_HOME=str(planted_path))

    def air(*args):
        return subprocess.run([air_bin, *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=60)

    ui = air("ui", "--url-only")
    assert_names_owner(ui, planted_path, attacker, 0o777)
    assert "AIR_HOME" in ui.stderr
    assert PLANTED_TOKEN not in ui.stdout
    assert not (planted_path / "tracking" / "server.json").exists(), "a server was started"

    scope = air("secrets", "create-scope", "s")
    assert_names_owner(scope, planted_path, attacker, 0o777)
    spec = write_spec(tmp_path, "echo hi", nodes=1)
    assert_names_owner(air("run", "-f", spec), planted_path, attacker, 0o777)
    assert_names_owner(air("list"), planted_path, attacker, 0o777)
    # Nothing of the user's was written into the other user's directory.
    assert sorted(p.name for p in planted_path.iterdir()) == ["tracking"]
    assert sorted(p.name for p in (planted_path / "tracking").iterdir()) == ["server.token"]


def test_an_air_home_of_the_user_that_others_can_write_is_refused(air_bin, tmp_path):
    home = tmp_path / "loose"
    home.mkdir()
    os.chmod(home, 0o777)
    proc = subprocess.run([air_bin, "list"], capture_output=True, text=True,
                          env=dict(os.environ, AIR_HOME=str(home)))
    assert proc.returncode == 1, proc
    assert f"AIR_HOME {home} is writable by others (mode 0777)" in proc.stderr, proc.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o777  # left for the user to inspect


def test_a_shared_root_another_user_planted_is_refused(air, air_home, attacker, planted_path,
                                                       tmp_path):
    plant_dir(attacker, planted_path, mode=0o755)
    (air_home / "config.yaml").write_text(f"shared_root: {planted_path}\n")
    proc = air("run", "-f", write_spec(tmp_path, "echo hi", nodes=1))
    assert_names_owner(proc, planted_path, attacker, 0o755)
    assert "shared_root" in proc.stderr
    assert list(planted_path.iterdir()) == []
    assert air("-o", "json", "list").returncode == 0
    assert '"runs":[]' in air("-o", "json", "list").stdout.replace(" ", "")


def test_a_symlink_planted_where_a_node_log_goes_is_not_followed(air, air_home, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    attempt = air_home / "runs" / "1" / "attempt_0"
    attempt.mkdir(parents=True, mode=0o700)
    (attempt / "node_0.log").symlink_to(victim)
    proc = air("run", "-f", write_spec(tmp_path, "echo planted-output", nodes=1))
    assert proc.returncode == 0, proc.stderr
    run_id = int(proc.stdout.strip())
    assert run_id == 1
    run = wait_terminal(air, run_id)
    assert run["state"] == "FAILED", run
    assert "node log" in str(run) and "is a symlink" in str(run), run
    assert victim.read_text() == "precious\n"
    assert (attempt / "node_0.log").is_symlink()


def test_volumes_cp_into_a_volume_folder_as_documented(air, air_home, tmp_path):
    data = tmp_path / "f.txt"
    data.write_text("one\n")
    # docs/volumes.md: `air volumes cp data.jsonl /Volumes/main/default/data/` creates the volume.
    air("volumes", "cp", data, "/Volumes/main/default/v/", check=True)
    root = air_home / "volumes" / "main" / "default" / "v"
    assert (root / "f.txt").read_text() == "one\n"
    # The volume without the slash is a folder too, and so is a new folder ending in '/'.
    (tmp_path / "g.txt").write_text("two\n")
    air("volumes", "cp", tmp_path / "g.txt", "/Volumes/main/default/v", check=True)
    air("volumes", "cp", tmp_path / "g.txt", "/Volumes/main/default/v/sub/", check=True)
    assert (root / "g.txt").read_text() == "two\n"
    assert (root / "sub" / "g.txt").read_text() == "two\n"
    # And back out, into a local folder.
    out = tmp_path / "out"
    air("volumes", "cp", "/Volumes/main/default/v/f.txt", f"{out}/", check=True)
    assert (out / "f.txt").read_text() == "one\n"
    refused = air("volumes", "cp", data, "/Volumes/main/default/v/f.txt/")
    assert refused.returncode == 2, refused
    assert "/Volumes/main/default/v/f.txt/ is a file, not a folder" in refused.stderr
