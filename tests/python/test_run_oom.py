"""A worker the kernel's OOM killer SIGKILLs under a memory limit, named as an OOM though no log
line says so (docs/alerts.md, "oom_killer" from the cgroup's counter). A real memory cgroup with
a 256 MiB limit holds `air run` (and so its supervisor, the agents and the commands); node 1's
command allocates 1 GiB and is killed by the kernel, node 0 sleeps. The run FAILS; its first
alert is the OOM kill on node 1 (the count, the limit, the peak, the node's own cgroup), and
node 0, which lost nothing, has none. The node's memory cgroups are gone afterwards.

Where this host's memory controller is: a v1 hierarchy (this machine: the agent gives each node
a v1 memory cgroup of its own, whose memory.oom_control counts the node's kills) or cgroup v2
when the test may enable the controller below its own cgroup (memory.events). A host that has
neither skips, saying so; tests/unit/runtime/oom_watch_test.cc covers the file formats."""
import os
import pathlib
import subprocess

import pytest

from runtime_jobs.helpers import explain, wait_terminal, write_spec

LIMIT = 256 << 20


def own_cgroup(controller: str):
    """This process's directory in the v1 hierarchy of `controller` ("" for cgroup v2)."""
    path = None
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, rel = line.split(":", 2)
        if (controller and controller in controllers.split(",")) or \
                (not controller and number == "0" and not controllers):
            path = rel
    if path is None:
        return None
    for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        dash = fields.index("-")
        fstype, options = fields[dash + 1], fields[dash + 3].split(",")
        if (not controller and fstype == "cgroup2") or \
                (controller and fstype == "cgroup" and controller in options):
            root, point = fields[3], fields[4]
            if path.startswith(root):
                return point + path[len(root.rstrip("/")):].rstrip("/")
    return None


def make_limited_cgroup(name: str):
    """A memory cgroup limited to LIMIT this test may put processes in, or (None, why)."""
    v1, v2 = own_cgroup("memory"), own_cgroup("")
    if v1:
        parent, limit_file, what = v1, "memory.limit_in_bytes", "v1 memory"
    elif v2 and "memory" in (pathlib.Path(v2) / "cgroup.subtree_control").read_text().split():
        parent, limit_file, what = v2, "memory.max", "cgroup v2 memory"
    else:
        return None, "no memory controller this test may use (v1 hierarchy or delegated v2)"
    limited = pathlib.Path(parent) / name
    try:
        limited.mkdir()
    except OSError as e:
        return None, f"cannot make a {what} cgroup under {parent}: {e}"
    (limited / limit_file).write_text(str(LIMIT))
    return limited, ""


@pytest.fixture
def limited_cgroup(air_home):
    limited, why = make_limited_cgroup(f"air-oom-test-{os.getpid()}")
    if limited is None:
        pytest.skip(why)
    yield limited
    # What air left in it (its tracking server) goes back where this test runs; then it goes.
    parent = limited.parent / "cgroup.procs"
    for pid in (limited / "cgroup.procs").read_text().split():
        try:
            parent.write_text(pid)
        except OSError:
            pass  # it exited meanwhile
    left = [p.name for p in limited.iterdir() if p.is_dir()]
    limited.rmdir()
    assert not left, f"node memory cgroups left behind: {left}"


def test_a_worker_killed_by_the_oom_killer_is_named(air, air_bin, air_home, tmp_path,
                                                     limited_cgroup):
    command = ('if [ "$NODE_RANK" = 1 ]; then echo "node 1 allocating"; '
               'exec python3 -c "b = bytearray(1 << 30); print(len(b))"; fi\n'
               'echo "node 0 waiting"; sleep 60\n')
    spec = write_spec(tmp_path, command, name="oom", nodes=2)
    # `air run` starts inside the limited cgroup: everything it starts stays below it.
    proc = subprocess.run(
        ["sh", "-c", f'echo $$ > {limited_cgroup}/cgroup.procs && exec "$0" run -f "$1"',
         air_bin, str(spec)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    run_id = int(proc.stdout.strip())
    run = wait_terminal(air, run_id, timeout=120)
    logs = {n: air("logs", run_id, "--node", n).stdout for n in (0, 1)}
    assert run["state"] == "FAILED", explain(run, logs)
    # The workload said nothing about it: only air's own note of the signal.
    said = [line for line in logs[1].splitlines() if line and not line.startswith("[air]")]
    assert said == ["node 1 allocating"], logs[1]

    alerts = run["alerts"]
    assert [(a["node"], a["class"]) for a in alerts] == [(1, "oom_killer")], alerts
    oom = alerts[0]
    print(oom["headline"], "\n", oom["line"])
    assert oom["rank"] == 1 and oom["stream"] == "cgroup" and oom["severity"] == "fatal"
    assert oom["fields"]["count"] == "1"
    assert oom["fields"]["memory_max"] == "256.0 MiB", oom
    assert oom["fields"]["memory_peak"].endswith("MiB"), oom
    node_cgroup = oom["fields"]["cgroup"]
    assert node_cgroup.startswith(f"{limited_cgroup}/air-r{run_id}-a0-n1-"), oom
    assert oom["headline"].startswith("killed by the kernel's OOM killer on node 1, rank 1 "
                                      "(count 1, memory_max 256.0 MiB, memory_peak "), oom
    assert "oom_kill 1 (was 0)" in oom["line"], oom
    assert run["failure_summary"].startswith(
        "attempt 0 of 1: first alert: killed by the kernel's OOM killer on node 1, rank 1"), run
    assert "node 1 was killed by signal 9" in run["failure_summary"], run
    assert not os.path.exists(node_cgroup)  # the agent removed the node's memory cgroup
    listed = air("logs", run_id, "--alerts").stdout
    assert "killed by the kernel's OOM killer on node 1, rank 1" in listed, listed
