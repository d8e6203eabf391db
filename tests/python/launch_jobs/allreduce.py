"""A plain PyTorch job: joins the gloo process group through the launcher's store, all-reduces
its rank and writes what it saw to $JOB_OUT/rank_<rank>.json."""
import json
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank)])
dist.all_reduce(value)
with open(os.path.join(os.environ["JOB_OUT"], f"rank_{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world_size": world, "sum": value.item(),
               "group_rank": int(os.environ["GROUP_RANK"]),
               "local_rank": int(os.environ["LOCAL_RANK"]), "host": socket.gethostname(),
               "master": os.environ["MASTER_ADDR"]}, f)
dist.barrier()
dist.destroy_process_group()
