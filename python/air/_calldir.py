"""The files of one call directory, shared by the caller (_call.py) and the ranks (_worker.py):
payload.pkl (the cloudpickled call), call.json (what a rank needs to know about the caller),
started/rank_<r> (rank r is running), results/rank_<r>.attempt_<k>[.error].pkl (its value or
its exception). Files are written under a temporary name and renamed into place.
Thread safety: pure functions."""
import os

PAYLOAD = "payload.pkl"
CALL_INFO = "call.json"
STARTED_DIR = "started"
RESULTS_DIR = "results"


def result_path(call_dir: str, rank: int, attempt: int) -> str:
    return os.path.join(call_dir, RESULTS_DIR, f"rank_{rank}.attempt_{attempt}.pkl")


def error_path(call_dir: str, rank: int, attempt: int) -> str:
    return os.path.join(call_dir, RESULTS_DIR, f"rank_{rank}.attempt_{attempt}.error.pkl")


def write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
