"""/Volumes on the local backend (docs/volumes.md): each node sees the volume root
(AIR_HOME/volumes, or AIR_VOLUMES_ROOT) at /Volumes through a private mount namespace, in its
command, env variables and parameters; `air volumes ls | cp | rm` reads and writes the same files
from the host; bad volume paths and an unwritable root are refused at submit with the field and
the path; without mount namespaces the nodes get the paths rewritten to the root; and nothing
is ever written to the host's /Volumes."""
import json
import os
import subprocess

from runtime_jobs.helpers import explain, submit, wait_terminal, write_spec

VOL = "/Volumes/main/default/scratch"


def host_volumes_listing():
    return sorted(os.listdir("/Volumes")) if os.path.isdir("/Volumes") else None


def test_nodes_read_and_write_volumes_that_the_host_sees(air, air_home, tmp_path):
    before = host_volumes_listing()
    data = tmp_path / "input.txt"
    data.write_text("hello from the host\n")
    assert air("volumes", "cp", data, f"{VOL}/in/input.txt", check=True).returncode == 0
    command = ('cat "$IN_FILE" && mkdir -p $OUT_DIR && '
               'echo "node $NODE_RANK wrote" > $OUT_DIR/node_$NODE_RANK.txt && '
               'echo "mounts=$(grep -c \' /Volumes \' /proc/self/mountinfo)" && '
               'ls /Volumes/main/default')
    spec = write_spec(tmp_path, command, nodes=2,
                      env_variables={"IN_FILE": f"{VOL}/in/input.txt", "OUT_DIR": f"{VOL}/out"},
                      parameters={"report": f"{VOL}/out/report.json"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    logs = air("logs", run_id, "--node", 1).stdout
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    assert "hello from the host" in logs and "scratch" in logs and "mounts=1" in logs
    root = air_home / "volumes" / "main" / "default" / "scratch"
    assert (root / "out" / "node_0.txt").read_text() == "node 0 wrote\n"
    assert (root / "out" / "node_1.txt").read_text() == "node 1 wrote\n"

    code, listing = air.json("volumes", "ls", f"{VOL}/out")
    assert code == 0, listing
    assert [e["name"] for e in listing["data"]["entries"]] == ["node_0.txt", "node_1.txt"]
    assert all(e["type"] == "file" and e["size"] == 13 for e in listing["data"]["entries"])
    assert f"{VOL}/out/node_1.txt" in air("volumes", "ls", f"{VOL}/out", check=True).stdout
    # Out of the volume, back in without --overwrite (refused), with it (replaced).
    local = tmp_path / "copied"
    air("volumes", "cp", "-r", f"{VOL}/out", local, check=True)
    assert (local / "node_0.txt").read_text() == "node 0 wrote\n"
    refused = air("volumes", "cp", local / "node_0.txt", f"{VOL}/out/node_1.txt")
    assert refused.returncode == 1 and "--overwrite" in refused.stderr
    air("volumes", "cp", "--overwrite", local / "node_0.txt", f"{VOL}/out/node_1.txt", check=True)
    assert (root / "out" / "node_1.txt").read_text() == "node 0 wrote\n"
    not_empty = air("volumes", "rm", f"{VOL}/out")
    assert not_empty.returncode == 2 and "-r" in not_empty.stderr
    air("volumes", "rm", f"{VOL}/out/node_0.txt", check=True)
    air("volumes", "rm", "-r", f"{VOL}/out", check=True)
    assert not (root / "out").exists() and (root / "in" / "input.txt").exists()
    assert host_volumes_listing() in (before, [])


def test_bad_volume_paths_are_refused_at_submit(air, air_home, tmp_path):
    cases = [
        ({"env_variables": {"OUT": "/Volumes/main/default/v/../../../etc"}},
         "env_variables.OUT", "contains '..'"),
        ({"parameters": {"output_dir": "/Volumes/main/bad!name/v/x"}},
         "parameters", "'bad!name' is not a valid schema name"),
        ({"command": "cp x /Volumes/-main/default/v/"}, "command", "not a valid catalog name"),
    ]
    for extra, field, message in cases:
        command = extra.pop("command", "true")
        spec = write_spec(tmp_path, command, nodes=1, **extra)
        code, out = air.json("run", "-f", spec)
        assert code == 2, out
        error = out["error"]["message"]
        assert field in error and message in error and str(spec) in error, error
    assert not (air_home / "runs").exists() or not any((air_home / "runs").iterdir())
    # The same rules on the host side.
    for path, message in [("/Volumes/main/default/v/../x", "contains '..'"),
                          ("/Volumes/ma in/x/y", "not a valid catalog name"),
                          ("/tmp/x", "is not a volume path")]:
        proc = air("volumes", "ls", path)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    escape = air_home / "volumes" / "main" / "default" / "v"
    escape.mkdir(parents=True)
    (escape / "link").symlink_to("/etc")
    proc = air("volumes", "cp", tmp_path / "workload.yaml", "/Volumes/main/default/v/link/x")
    assert proc.returncode == 2 and "/Volumes/main/default/v/link' is a symbolic link" in \
        proc.stderr, proc.stderr
    assert not os.path.exists("/etc/x")


def test_unwritable_volume_root_is_refused_at_submit(air, air_home, tmp_path):
    spec = write_spec(tmp_path, "true", nodes=1,
                      parameters={"output_dir": "/Volumes/main/default/ckpt/run1"})
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    env = dict(os.environ, AIR_VOLUMES_ROOT=str(blocker / "volumes"))
    code, out = air.json("run", "-f", spec, env=env)
    assert code == 1, out
    error = out["error"]["message"]
    assert str(blocker / "volumes") in error and "cannot be created" in error, error
    assert "parameters" in error and "/Volumes/main/default/ckpt/run1" in error
    # A read-only root (a read-only bind mount in a private namespace: root ignores modes).
    ro = tmp_path / "ro_root"
    ro.mkdir()
    script = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && "
              f"AIR_VOLUMES_ROOT={ro} exec {air.binary} -o json run -f {spec}")
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc
    error = json.loads(proc.stdout)["error"]["message"]
    assert f"the volume root {ro} is not writable" in error, error


def test_without_mount_namespaces_the_nodes_get_rewritten_paths(air, air_home, tmp_path):
    """A user namespace whose mount- and user-namespace limits are 0: the kernel refuses both
    kinds of namespace, as on a machine that does not allow them. The spec's /Volumes paths
    reach the nodes rewritten to the volume root (docs/volumes.md); a root that cannot stand
    in for /Volumes is refused at submit. (As a non-root user: test_run_nonroot.py.)"""
    spec = write_spec(tmp_path, "echo done > $OUT", nodes=1,
                      env_variables={"OUT": "/Volumes/main/default/ckpt/out.txt"})
    limits = ("echo 0 > /proc/sys/user/max_mnt_namespaces && "
              "echo 0 > /proc/sys/user/max_user_namespaces && ")

    def without_namespaces(args, env_prefix=""):
        script = f"{limits}{env_prefix}exec {air.binary} {args}"
        return subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", script],
                              capture_output=True, text=True, timeout=120)

    proc = without_namespaces(f"run --watch -f {spec}")
    assert proc.returncode == 0, proc
    assert (air_home / "volumes/main/default/ckpt/out.txt").read_text() == "done\n"
    odd = tmp_path / "odd;root"
    proc = without_namespaces(f"-o json run -f {spec}", f"AIR_VOLUMES_ROOT='{odd}' ")
    assert proc.returncode == 1, proc
    error = json.loads(proc.stdout)["error"]["message"]
    assert "env_variables.OUT" in error and "/Volumes/main/default/ckpt/out.txt" in error, error
    assert "private mount namespace" in error and f"the volume root {odd} cannot" in error
    assert "never writes volume data" in error, error
    # A spec without volume paths runs there too (its nodes simply get no /Volumes mount).
    plain = write_spec(tmp_path, "echo plain", nodes=1, filename="plain.yaml")
    assert without_namespaces(f"run --watch -f {plain}").returncode == 0


def leftovers(*roots):
    # AtomicFileWriter's temporaries (base/atomic_file.h): ".<name>.tmp.<8 hex>".
    return [p for root in roots for p in root.rglob("*") if ".tmp." in p.name]


def test_symlinks_under_the_volume_root_are_never_followed(air, air_home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not for the volumes\n")
    vol = air_home / "volumes" / "main" / "default" / "v"
    (vol / "tree" / "deep").mkdir(parents=True)
    (vol / "tree" / "a.txt").write_text("a")
    (vol / "tree" / "deep" / "b.txt").write_text("b")
    (vol / "tree" / "deep" / "escape").symlink_to(outside)  # planted by a node
    (vol / "link").symlink_to(outside)
    (vol / "secret_link").symlink_to(outside / "secret")
    V = "/Volumes/main/default/v"

    # ls shows links as links and never lists through them.
    code, out = air.json("volumes", "ls", "-r", V)
    assert code == 0, out
    types = {e["name"]: e["type"] for e in out["data"]["entries"]}
    assert types == {"link": "symlink", "secret_link": "symlink", "tree": "directory",
                     "tree/a.txt": "file", "tree/deep": "directory", "tree/deep/b.txt": "file",
                     "tree/deep/escape": "symlink"}, types
    code, out = air.json("volumes", "ls", f"{V}/link")
    assert code == 0 and [(e["name"], e["type"]) for e in out["data"]["entries"]] == \
        [("link", "symlink")], out
    for path in (f"{V}/link/secret", f"{V}/tree/deep/escape/secret"):
        proc = air("volumes", "ls", path)
        assert proc.returncode == 2 and "is a symbolic link" in proc.stderr, (path, proc.stderr)
        assert "not for the volumes" not in proc.stdout

    # cp never reads or writes through a link; cp -r of a tree holding one names it and
    # copies nothing at all.
    for src in (f"{V}/link/secret", f"{V}/secret_link"):
        proc = air("volumes", "cp", src, tmp_path / "got")
        assert proc.returncode == 2 and "symbolic link" in proc.stderr, (src, proc.stderr)
    proc = air("volumes", "cp", "-r", f"{V}/tree", tmp_path / "copy")
    assert proc.returncode == 2, proc.stderr
    assert f"'{V}/tree/deep/escape' is a symbolic link" in proc.stderr, proc.stderr
    assert "nothing was copied" in proc.stderr
    assert not (tmp_path / "got").exists() and not (tmp_path / "copy").exists()
    local = tmp_path / "local_tree"
    (local / "sub").mkdir(parents=True)
    (local / "sub" / "ok.txt").write_text("ok")
    (local / "sub" / "out").symlink_to(outside)
    proc = air("volumes", "cp", "-r", local, f"{V}/incoming")
    assert proc.returncode == 2 and f"'{local}/sub/out' is a symbolic link" in proc.stderr
    assert not (vol / "incoming").exists()
    proc = air("volumes", "cp", local / "sub" / "ok.txt", f"{V}/link/planted.txt")
    assert proc.returncode == 2 and not (outside / "planted.txt").exists()
    # Without the link, the same tree copies whole, both ways.
    (local / "sub" / "out").unlink()
    air("volumes", "cp", "-r", local, f"{V}/incoming", check=True)
    assert (vol / "incoming" / "sub" / "ok.txt").read_text() == "ok"
    (vol / "tree" / "deep" / "escape").unlink()
    air("volumes", "cp", "-r", f"{V}/tree", tmp_path / "copy", check=True)
    assert (tmp_path / "copy" / "deep" / "b.txt").read_text() == "b"
    assert leftovers(vol, tmp_path / "copy") == []

    # rm never removes through a link; removing the link removes only the link.
    proc = air("volumes", "rm", f"{V}/link/secret")
    assert proc.returncode == 2 and "symbolic link" in proc.stderr
    air("volumes", "rm", f"{V}/link", check=True)
    air("volumes", "rm", f"{V}/secret_link", check=True)
    (vol / "tree" / "deep" / "escape").symlink_to(outside)
    air("volumes", "rm", "-r", V, check=True)
    assert not vol.exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_text() == "not for the volumes\n"

    # A spec whose volume path leads through a link: refused by --dry-run as by submit.
    vol.mkdir(parents=True)
    (vol / "ckpt").symlink_to(outside)
    spec = write_spec(tmp_path, "echo x > $OUT", nodes=1,
                      env_variables={"OUT": f"{V}/ckpt/out.txt"})
    for dry in (["--dry-run"], []):
        code, out = air.json("run", "-f", spec, *dry)
        assert code == 2, out
        message = out["error"]["message"]
        assert "env_variables.OUT" in message and f"{V}/ckpt" in message, message
        assert "symbolic link" in message
    assert not (air_home / "runs").exists() or not any((air_home / "runs").iterdir())
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
