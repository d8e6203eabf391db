"""AIR_HOME/config.yaml and the backend registry, on the local backend: `shared_root` moves runs,
snapshots and logs to another directory (the store stays in AIR_HOME) and every command finds
them there; an unknown backend (file or --backend) is refused before anything is written."""
import yaml

from runtime_jobs.helpers import submit, wait_terminal, write_spec


def test_shared_root_holds_the_runs_and_every_command_finds_them(air, air_home, tmp_path):
    shared = tmp_path / "shared"
    (air_home / "config.yaml").write_text(yaml.safe_dump({"shared_root": str(shared)}))
    spec = write_spec(tmp_path, 'echo "node $NODE_RANK in $CODE_SOURCE_PATH"', nodes=2)
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id)
    assert run["state"] == "SUCCEEDED", run
    assert run["backend"] == "local"
    assert (air_home / "air.db").exists() and not (air_home / "runs").exists()
    assert (shared / "runs" / str(run_id) / "attempt_0" / "node_1.log").exists()
    logs = air("logs", run_id, "--node", 1, check=True).stdout
    assert f"node 1 in {shared}/runs/{run_id}/nodes/node_1" in logs


def test_unknown_backend_is_refused_before_anything_is_written(air, air_home, tmp_path):
    spec = write_spec(tmp_path, "true", nodes=1)
    proc = air("run", "-f", spec, "--backend", "kubernetes")
    assert proc.returncode == 2, proc.stderr
    assert "--backend: unknown backend 'kubernetes'; valid: local" in proc.stderr
    (air_home / "config.yaml").write_text("backend: lokal\n")
    proc = air("run", "-f", spec)
    assert proc.returncode == 2, proc.stderr
    assert "config.yaml:1: backend: unknown backend 'lokal'; valid: local" in proc.stderr
    assert not (air_home / "air.db").exists()
