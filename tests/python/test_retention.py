"""Retention: `air delete RUN...` and `air gc --older-than D` remove ended runs with their logs
and run directories, then the snapshots (manifests and blobs) and Python environments no
remaining run uses; a run that has not ended is refused and nothing is deleted."""
import os

from runtime_jobs.helpers import submit, wait_for, wait_terminal, write_spec
from test_run_env import build_wheel


def blobs(air_home):
    cas = air_home / "cas" / "sha256"
    return sorted(p.name for p in cas.rglob("*") if p.is_file()) if cas.exists() else []


def manifests(air_home):
    d = air_home / "snapshots"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_delete_and_gc_remove_runs_and_what_only_they_used(air, air_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text("print('shared code')\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "solo.py").write_text("print('only run 3')\n")
    shared = {"type": "snapshot", "snapshot": {"root_path": "code"}}
    first = submit(air, write_spec(tmp_path, "python3 job.py", nodes=1, code_source=shared))
    second = submit(air, write_spec(tmp_path, "python3 job.py", nodes=1, code_source=shared,
                                    filename="b.yaml"))
    wheel = build_wheel(tmp_path)
    third = submit(air, write_spec(tmp_path, "python3 solo.py", nodes=1, filename="c.yaml",
                                   code_source={"type": "snapshot",
                                                "snapshot": {"root_path": "other"}},
                                   environment={"dependencies": [str(wheel)]}))
    for run_id in (first, second, third):
        assert wait_terminal(air, run_id, timeout=180)["state"] == "SUCCEEDED"
    assert len(manifests(air_home)) == 2 and len(blobs(air_home)) == 2
    envs = [p.name for p in (air_home / "envs").iterdir() if p.is_dir()]
    assert len(envs) == 1

    # A live run is refused, and nothing is deleted with it.
    live = submit(air, write_spec(tmp_path, "sleep 30", nodes=1, filename="live.yaml"))
    wait_for(air, live, lambda r: r["state"] == "RUNNING", timeout=60)
    code_, out = air.json("delete", first, live)
    assert code_ == 1 and "RUNNING" in out["error"]["message"], out
    assert "air cancel" in out["error"]["message"]
    assert (air_home / "runs" / str(first)).exists()
    air("cancel", live, check=True)

    # Run 1 shares its snapshot with run 2: its directory and records go, the snapshot stays.
    code_, out = air.json("delete", first)
    assert code_ == 0, out
    assert out["data"]["deleted_runs"] == [first] and out["data"]["manifests_removed"] == 0
    assert not (air_home / "runs" / str(first)).exists()
    gone = air("get", first)
    assert gone.returncode != 0 and "does not exist" in gone.stderr + gone.stdout
    assert air("logs", first).returncode != 0
    assert len(manifests(air_home)) == 2

    # Run 3 alone used its snapshot and its environment.
    code_, out = air.json("delete", third)
    assert code_ == 0, out
    assert out["data"]["manifests_removed"] == 1 and out["data"]["blobs_removed"] == 1
    assert out["data"]["environments_removed"] == envs
    assert not any(p.is_dir() for p in (air_home / "envs").iterdir())
    assert len(manifests(air_home)) == 1 and len(blobs(air_home)) == 1

    # gc: a recent run stays with --older-than 1d, goes with 0s, and so does its snapshot.
    code_, out = air.json("gc", "--older-than", "1d")
    assert code_ == 0 and out["data"]["deleted_runs"] == [], out
    assert (air_home / "runs" / str(second)).exists()
    wait_terminal(air, live, timeout=60)
    code_, out = air.json("gc", "--older-than", "0s")
    assert code_ == 0, out
    assert sorted(out["data"]["deleted_runs"]) == sorted([second, live])
    assert manifests(air_home) == [] and blobs(air_home) == []
    assert os.listdir(air_home / "runs") == []

    bad = air("gc", "--older-than", "soon")
    assert bad.returncode == 2 and "30d, 12h, 90m or 45s" in bad.stderr
    missing = air("delete", 999)
    assert missing.returncode == 1 and "999" in missing.stderr
