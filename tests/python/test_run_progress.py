"""Progress of real runs (runtime/progress.h, docs/state-machine.md "Progress"): two local
nodes on a simulated 2-GPU host (CUDA_VISIBLE_DEVICES, as test_run_gpu_lease.py) run a
training-shaped job. While it is paused mid-way, `air get` shows its step, rate and ETA and
its GPU-hours so far; after it ends, `air get -o json` and `air list -o json` give the step,
time to the first step and GPU-hours equal to GPUs x each attempt's wall time. Steps come from
the real mlflow client's metrics (the seed's way) or, without tracking calls, from the
`step=N/M` lines of node 0's log; and from Hugging Face Trainer's own MLflow logging."""
import pathlib
import time

from runtime_jobs.helpers import (explain, get, stage_venv_job, submit, wait_for, wait_terminal,
                                  write_spec)

JOB_DIR = pathlib.Path(__file__).parent / "runtime_jobs" / "progress"


def start(air, tmp_path, monkeypatch, use_mlflow):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # a 2-GPU host
    out = stage_venv_job(tmp_path, monkeypatch, JOB_DIR)
    spec = write_spec(tmp_path, "python -u job.py", name="progress", nodes=2,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"JOB_OUT": str(out), "MAX_STEPS": "40", "PAUSE_AT": "21",
                                     "STEP_SECONDS": "0.05",
                                     "USE_MLFLOW": "1" if use_mlflow else "0"})
    spec.write_text(spec.read_text().replace("CPU_1", "GPU_1xA10"))
    return submit(air, spec), out


def check_live_then_done(air, run_id, out, source):
    # Paused before step 21: 20 steps done, the rate known, the ETA shown.
    run = wait_for(air, run_id, lambda r: (r.get("progress") or {}).get("step") == 20,
                   timeout=180, interval=0.2)
    progress = run["progress"]
    assert run["state"] == "RUNNING"
    assert progress["step_source"] == source, progress
    assert progress["max_steps"] == 40 and progress["percent"] == 50, progress
    assert progress["steps_per_s"] > 0 and progress["eta_s"] is not None, progress
    assert progress["accelerators"] == 2 and progress["gpu_hours"] > 0, progress
    text = air("get", run_id, check=True).stdout
    assert "progress     step 20/40 (50%), " in text and ", ETA " in text, text
    assert "gpu-hours    " in text and "(2 GPUs in the latest attempt)" in text, text
    assert "first step   " in text, text
    (out / "release").touch()
    run = wait_terminal(air, run_id, timeout=180)
    assert run["state"] == "SUCCEEDED", explain(run, {0: air("logs", run_id, "--node", 0).stdout})
    progress = run["progress"]
    assert progress["step"] == 40 and progress["percent"] == 100, progress
    assert progress["eta_s"] is None  # ended
    attempt = run["attempt_details"][0]
    # GPU-hours: 2 GPUs x the attempt's wall time.
    want = 2 * (attempt["ended_us"] - attempt["started_us"]) / 3.6e9
    assert abs(progress["gpu_hours"] - want) < 1e-9, (progress, want)
    assert 0 < progress["time_to_first_step_s"] < (attempt["ended_us"] - attempt["started_us"]) / 1e6
    code, listed = air.json("list", "--all-status")
    assert code == 0
    item = next(r for r in listed["data"]["runs"] if r["run_id"] == run_id)
    assert item["progress"]["gpu_hours"] == progress["gpu_hours"]
    assert item["progress"]["step"] == 40
    return progress


def test_progress_from_the_mlflow_metrics(air, air_home, tmp_path, monkeypatch):
    run_id, out = start(air, tmp_path, monkeypatch, use_mlflow=True)
    progress = check_live_then_done(air, run_id, out, "metrics")
    assert progress["max_steps_source"] == "param max_steps"


def test_progress_from_the_log_lines(air, air_home, tmp_path, monkeypatch):
    run_id, out = start(air, tmp_path, monkeypatch, use_mlflow=False)
    progress = check_live_then_done(air, run_id, out, "log")
    assert progress["max_steps_source"] == "log"


def test_progress_of_hugging_face_trainers_own_mlflow_logging(air, air_home, tmp_path,
                                                              monkeypatch):
    """HF Trainer, report_to="mlflow" (its MLflowCallback, unchanged): the steps and max_steps
    come from what the Trainer logs to the run air created."""
    out = stage_venv_job(tmp_path, monkeypatch, JOB_DIR.parent / "hf_trainer")
    spec = write_spec(tmp_path, "python -u job.py", name="hf-trainer", nodes=1,
                      code_source={"type": "snapshot", "snapshot": {"root_path": "code"}},
                      env_variables={"JOB_OUT": str(out), "MAX_STEPS": "12",
                                     "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                                     "GIT_PYTHON_REFRESH": "quiet"})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=300)
    assert run["state"] == "SUCCEEDED", explain(run, {0: air("logs", run_id, "--node", 0).stdout})
    progress = run["progress"]
    assert progress["step_source"] == "metrics", progress
    assert progress["step"] == 12 and progress["max_steps"] == 12, progress
    assert progress["max_steps_source"] == "param max_steps", progress
    assert progress["percent"] == 100 and progress["time_to_first_step_s"] > 0, progress
