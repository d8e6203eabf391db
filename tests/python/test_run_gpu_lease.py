"""Concurrent runs on a GPU host get disjoint devices: the supervisor leases them in the store
before an attempt starts, a run that finds too few free waits (a "gpu" event names the
holders) and starts when they are released; CUDA_VISIBLE_DEVICES="" means no GPUs, not all.
The host's GPUs are simulated through CUDA_VISIBLE_DEVICES, the seam the local backend reads
(the commands only print the ids they were given)."""
import os
import sqlite3
import time

from runtime_jobs.helpers import get, submit, wait_terminal, write_spec


def gpu_spec(tmp_path, name, out, release):
    command = (f'echo "$CUDA_VISIBLE_DEVICES" > {out}/$AIR_RUN_ID.$NODE_RANK; '
               f'while [ ! -e {release}/$AIR_RUN_ID ]; do sleep 0.05; done')
    spec = write_spec(tmp_path, command, nodes=2, filename=f"{name}.yaml")
    text = spec.read_text().replace("CPU_1", "GPU_1xA10")
    spec.write_text(text)
    return spec


def gpu_events(air_home, run_id):
    with sqlite3.connect(air_home / "air.db") as db:
        return [m for (m,) in db.execute(
            "SELECT message FROM events WHERE run_id = ? AND kind = 'gpu' ORDER BY id", (run_id,))]


def test_concurrent_runs_get_disjoint_gpus(air, air_home, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # a 4-GPU host
    out = tmp_path / "out"
    out.mkdir()
    release = tmp_path / "release"
    release.mkdir()
    first = submit(air, gpu_spec(tmp_path, "a", out, release))
    second = submit(air, gpu_spec(tmp_path, "b", out, release))

    def devices(run_id):
        files = [out / f"{run_id}.{n}" for n in (0, 1)]
        deadline = time.monotonic() + 60
        while not all(f.exists() and f.read_text() for f in files):
            assert time.monotonic() < deadline, get(air, run_id)
            time.sleep(0.05)
        return [f.read_text().strip() for f in files]

    a, b = devices(first), devices(second)
    assert len(set(a + b)) == 4 and sorted(a + b) == ["0", "1", "2", "3"], (a, b)
    # A third run waits for two free devices...
    third = submit(air, gpu_spec(tmp_path, "c", out, release))
    deadline = time.monotonic() + 60
    while not gpu_events(air_home, third):
        assert time.monotonic() < deadline, get(air, third)
        time.sleep(0.05)
    waiting = gpu_events(air_home, third)[0]
    assert "waiting for 2 of this host's 4 GPU(s)" in waiting, waiting
    assert str(first) in waiting and str(second) in waiting, waiting
    assert not (out / f"{third}.0").exists()
    # ... and gets the first run's devices once it ends.
    (release / str(first)).touch()
    assert wait_terminal(air, first, timeout=60)["state"] == "SUCCEEDED"
    assert sorted(devices(third)) == sorted(a)
    for run_id in (second, third):
        (release / str(run_id)).touch()
        assert wait_terminal(air, run_id, timeout=60)["state"] == "SUCCEEDED"


def test_empty_cuda_visible_devices_means_no_gpus(air, air_home, tmp_path):
    spec = gpu_spec(tmp_path, "none", tmp_path, tmp_path)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    code, out = air.json("run", "-f", spec, env=env)
    assert code == 2, out
    assert "the local backend has 0 on this host" in out["error"]["message"], out
