"""A training-shaped job for the progress figures: MAX_STEPS steps of STEP_SECONDS each, printed
as the seed's train.py prints them (`step=N/M loss=...`) by node 0 and, with USE_MLFLOW=1, logged
as the seed logs them (rank 0 resumes the MLflow run air created, logs the param max_steps and
`train_loss` per step with the real mlflow client). Before step PAUSE_AT it waits for the file
$JOB_OUT/release, so a test can look at the run while it is live."""
import os
import time

rank = int(os.environ["NODE_RANK"])
max_steps = int(os.environ["MAX_STEPS"])
pause_at = int(os.environ.get("PAUSE_AT", "0"))
use_mlflow = rank == 0 and os.environ.get("USE_MLFLOW") == "1"
if use_mlflow:
    import mlflow

    mlflow.start_run(run_id=os.environ["MLFLOW_RUN_ID"])
    mlflow.log_params({"max_steps": max_steps, "lr": 1e-4})
for step in range(1, max_steps + 1):
    if step == pause_at:
        while not os.path.exists(os.path.join(os.environ["JOB_OUT"], "release")):
            time.sleep(0.05)
    time.sleep(float(os.environ["STEP_SECONDS"]))
    loss = 3.0 / step
    if rank == 0:
        print(f"step={step}/{max_steps} loss={loss:.4f}", flush=True)
        if use_mlflow:
            mlflow.log_metric("train_loss", loss, step=step)
if use_mlflow:
    mlflow.end_run()
