"""Hang detection on the Slurm backend (hang_timeout_minutes, docs/state-machine.md "Hangs"):
test_run_hang.py's job on two nodes of the real Slurm cluster (runtime_jobs/slurm_cluster.py),
rank 0 blocked in a real Gloo all_reduce that rank 1 never joins. The run records one `hang`
event naming both silent nodes and their last lines within hang_timeout_minutes + 30 s of their
last output; `on_hang: fail` ends the run FAILED, cancels the Slurm job and leaves no process."""
from runtime_jobs.helpers import explain, submit, wait_terminal
from runtime_jobs.slurm_cluster import job_of, slurm_cluster, slurm_home  # noqa: F401 (fixtures)
from test_run_hang import HANG_MINUTES, check_hang_event, hang_spec, logs_of
from test_slurm import assert_nothing_left


def test_a_gloo_hang_on_two_slurm_nodes_is_named(air, slurm_home, tmp_path, monkeypatch):
    spec, out = hang_spec(tmp_path, monkeypatch, max_retries=1, on_hang="fail")
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=HANG_MINUTES * 60 + 180)
    assert run["backend"] == "slurm"
    assert run["state"] == "FAILED", explain(run, logs_of(air, run_id))
    message = check_hang_event(slurm_home, run_id, 0)
    assert run["attempts"] == 1, run  # on_hang: fail does not retry
    assert run["failure_summary"].startswith("attempt 0 of 2: hung: no node wrote output"), run
    assert not list(out.iterdir())  # neither rank got past the collective
    job = job_of(f"air-{run_id}-0")
    assert job["JobState"] != "RUNNING", job
    print(message)
    assert_nothing_left(slurm_home, [run_id], [job["JobId"]])
