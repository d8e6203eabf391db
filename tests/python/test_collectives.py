"""The Gloo process group (src/engine/parallel) as real processes: air_collectives_check checks
every collective bit for bit on 3 ranks started by hand (rank 0 hosts the store), on 2 ranks
under the real torchrun (the workers join torchrun's own TCPStore), and the faults: a rank
SIGKILLed mid-collective is named by every survivor and no process is left, a rank that never
joins is named, a port in use is a clear error."""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

from runtime_jobs.helpers import free_port

VENV_BIN = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")


@pytest.fixture(scope="module")
def check_bin(air_bin) -> str:
    path = pathlib.Path(air_bin).parent / "air_collectives_check"
    assert path.exists(), f"{path} is missing: build the tests' tools (cmake --build build)"
    return str(path)


def start_ranks(check_bin, world, port, ranks=None, args=()):
    procs = {}
    for rank in (range(world) if ranks is None else ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        procs[rank] = subprocess.Popen([check_bin, *args], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
    return procs


def finish(procs, timeout=120):
    out = {}
    for rank, p in procs.items():
        stdout, stderr = p.communicate(timeout=timeout)
        out[rank] = (p.returncode, stdout, stderr)
    return out


def test_every_collective_is_bit_exact_on_three_ranks(check_bin):
    results = finish(start_ranks(check_bin, 3, free_port(), args=["--count", "30011"]))
    for rank, (code, stdout, stderr) in results.items():
        assert code == 0, (rank, stdout, stderr)
        assert f"rank {rank}/3: ok" in stdout, stdout


def test_collectives_under_the_real_torchrun(check_bin, tmp_path):
    torchrun = os.path.join(VENV_BIN, "torchrun")
    assert os.path.exists(torchrun), torchrun
    proc = subprocess.run(
        [torchrun, "--nnodes", "1", "--nproc-per-node", "2", "--master-port", str(free_port()),
         "--no-python", check_bin, "--count", "5003"],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    for rank in (0, 1):
        assert f"rank {rank}/2: ok" in proc.stdout
    # The workers joined torchrun's store (TORCHELASTIC_USE_AGENT_STORE=True), not their own.
    assert "hosted by the launcher" in proc.stdout


def test_a_rank_killed_mid_collective_is_named_by_every_survivor(check_bin):
    procs = start_ranks(check_bin, 3, free_port(),
                        args=["--loop", "--count", "200000", "--timeout-seconds", "30"])
    for rank, p in procs.items():
        line = p.stdout.readline()
        assert "looping" in line, (rank, line, p.stderr.read() if p.poll() is not None else "")
    time.sleep(0.2)  # all three are inside all-reduces now
    procs[1].send_signal(signal.SIGKILL)
    results = finish(procs, timeout=60)
    assert results[1][0] == -signal.SIGKILL
    for rank in (0, 2):
        code, _, stderr = results[rank]
        assert code == 1, (rank, stderr)
        assert "lost rank 1 (host" in stderr, (rank, stderr)
    assert all(p.poll() is not None for p in procs.values())


def test_a_rank_that_never_joins_is_named(check_bin):
    # Long enough that rank 1 joins on a loaded machine; only rank 2 is missing.
    results = finish(start_ranks(check_bin, 3, free_port(), ranks=[0, 1],
                                 args=["--join-timeout-seconds", "10"]))
    for rank in (0, 1):
        code, _, stderr = results[rank]
        assert code == 1, (rank, stderr)
        assert "ranks 2 of 3 did not join within 10 s" in stderr, stderr


def test_rank_zero_that_never_starts_is_named(check_bin):
    results = finish(start_ranks(check_bin, 2, free_port(), ranks=[1],
                                 args=["--join-timeout-seconds", "1"]))
    code, _, stderr = results[1]
    assert code == 1
    assert "rank 0 did not join" in stderr and "missing ranks: 0" in stderr, stderr


def test_a_port_in_use_is_a_clear_error(check_bin):
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        results = finish(start_ranks(check_bin, 2, port, ranks=[0],
                                     args=["--join-timeout-seconds", "2"]))
    code, _, stderr = results[0]
    assert code == 1
    assert f"port {port} is in use" in stderr, stderr


def test_inconsistent_rank_variables_are_refused(check_bin):
    env = dict(os.environ, RANK="2", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    proc = subprocess.run([check_bin], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "RANK=2 is not valid with WORLD_SIZE=2: ranks are 0..1" in proc.stderr


def test_a_collective_that_never_completes_ends_naming_rank_and_collective(check_bin):
    """A hang, not a death: rank 1 joins and stays alive but never enters the all_reduce the
    others wait in. Their collective timeout ends it with an error naming the waiting rank, the
    collective and its number, and rank 1 as the one that never entered it (each waiting rank
    records its collective in the store); rank 1 is left running (killed here)."""
    procs = start_ranks(check_bin, 3, free_port(),
                        args=["--stall-rank", "1", "--timeout-seconds", "2", "--count", "1000"])
    try:
        for rank in (0, 2):
            code, stdout, stderr = finish({rank: procs[rank]}, timeout=60)[rank]
            assert "entering all_reduce" in stdout, (rank, stdout, stderr)
            assert code == 1, (rank, stdout, stderr)
            # The waiting rank, the collective and its number, and the rank that never came.
            assert (f"all_reduce of 1000 f32 (collective #1) on rank {rank} did not complete "
                    "within 2 s: rank 1 (host ") in stderr, (rank, stderr)
            assert f"pid {procs[1].pid}) never entered it" in stderr, stderr
            assert "Timed out waiting 2000ms" in stderr, stderr
        assert procs[1].poll() is None  # the stalled rank is alive: a hang, not a lost peer
        assert "stalling outside every collective" in procs[1].stdout.readline()
    finally:
        procs[1].kill()
        procs[1].wait()
