"""Functions the @distributed tests run on every rank (importable by the ranks, so cloudpickle
sends them by reference; the notebook and subprocess tests cover functions sent by value)."""
import json
import os
import sys
import time

ENV_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
            "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "NUM_NODES", "NODE_RANK",
            "AIR_RUN_ID", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "CODE_SOURCE_PATH",
            "USER_SETTING"]


def all_reduce_rank(probe_dir):
    """gloo all-reduce of this rank's number; records what the rank saw in probe_dir."""
    import torch
    import torch.distributed as dist

    import helper_in_cwd  # a module of the caller's working directory: comes in the snapshot

    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank())])
    dist.all_reduce(value)
    rank = dist.get_rank()
    print(f"rank {rank} of {dist.get_world_size()} saw sum {value.item()}", flush=True)
    print(f"stderr line of rank {rank}", file=sys.stderr, flush=True)
    seen = {k: os.environ.get(k) for k in ENV_KEYS}
    seen["helper"] = helper_in_cwd.VALUE
    seen["token_matches"] = os.environ.get("PY_TOKEN") == "s3cr3t-value-for-the-ranks"
    if rank == 0:
        print(f"the token is {os.environ.get('PY_TOKEN')}", flush=True)  # redacted in the log
    seen["cwd"] = os.getcwd()
    with open(os.path.join(probe_dir, f"rank_{rank}.json"), "w") as f:
        json.dump(seen, f)
    dist.destroy_process_group()
    return value.item()


def fail_on_rank_1():
    if os.environ["RANK"] == "1":
        raise ValueError("boom")
    return "rank 0 finished"


def return_unpicklable():
    return (i for i in range(3))  # a generator: cloudpickle cannot serialize it


def sleep_forever(marker_dir):
    open(os.path.join(marker_dir, f"ready_{os.environ['RANK']}"), "w").close()
    print("ready", flush=True)
    time.sleep(3600)


def print_lines_then_return(n):
    """Prints n numbered lines as the function's last act (the worker's rank prefix must copy
    every one of them before the process exits)."""
    import os
    rank = int(os.environ["RANK"])
    for i in range(n):
        print(f"line {i} of rank {rank}")
    return rank
