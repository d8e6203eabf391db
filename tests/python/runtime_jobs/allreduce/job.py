"""A plain PyTorch job, launched unchanged by torchrun on every node: it joins the process group
(gloo), all-reduces its rank and writes what it saw to $JOB_OUT/rank_<rank>.json."""
import json
import os
import socket

import torch
import torch.distributed as dist


def main():
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    value = torch.tensor([float(rank)])
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    seen = {
        "rank": rank,
        "world_size": world,
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "group_rank": int(os.environ["GROUP_RANK"]),
        "node_rank": int(os.environ["NODE_RANK"]),
        "sum": value.item(),
        "master": f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }
    with open(os.path.join(os.environ["JOB_OUT"], f"rank_{rank}.json"), "w") as f:
        json.dump(seen, f)
    print(f"rank {rank}/{world} on node {seen['node_rank']} saw all_reduce sum {value.item():g}",
          flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
