#!/usr/bin/env python3
"""All-reduce across every worker of a multi-node torchrun job on CPUs (gloo).

Each worker contributes a tensor filled with its global rank; after the all-reduce every
worker holds the sum of all ranks (0+1+2+3 = 6 for 4 workers). Each worker prints what it saw
and writes it as JSON to <output_dir>/<run id>/rank_<rank>.json, so a test (or a person) can
check that all ranks met. Hyperparameters come from the file at HYPERPARAMETERS_PATH.
"""

import json
import os
import socket

import torch
import torch.distributed as dist


def load_params() -> dict:
    path = os.environ.get("HYPERPARAMETERS_PATH")
    if not path or not os.path.exists(path):
        return {}
    import yaml

    with open(path) as f:
        return yaml.safe_load(f) or {}


def main():
    params = load_params()
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    size = int(params.get("tensor_size", 4))

    value = torch.full((size,), float(rank))
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    total = value.tolist()
    expected = world_size * (world_size - 1) / 2

    seen = {
        "rank": rank,
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "node_rank": int(os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", "0"))),
        "world_size": world_size,
        "num_nodes": int(os.environ.get("NUM_NODES", "1")),
        "sum": total[0],
        "expected": expected,
        "host": socket.gethostname(),
    }
    print(
        f"rank {rank}/{world_size} node {seen['node_rank']} local {seen['local_rank']}: "
        f"all_reduce sum = {total[0]:g} (expected {expected:g})",
        flush=True,
    )
    output_dir = params.get("output_dir")
    if output_dir:
        run_dir = os.path.join(output_dir, os.environ.get("AIR_RUN_ID", "local"))
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, f"rank_{rank}.json"), "w") as f:
            json.dump(seen, f)

    dist.barrier()
    dist.destroy_process_group()
    if any(v != expected for v in total):
        raise SystemExit(f"rank {rank}: all_reduce gave {total}, expected {expected}")


if __name__ == "__main__":
    main()
