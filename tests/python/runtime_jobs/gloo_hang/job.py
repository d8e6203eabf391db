"""A job that hangs in a real Gloo collective on its first attempt: one process per node, rank
= NODE_RANK. On attempt 0 (AIR_ATTEMPT) rank 0 enters an all_reduce that rank 1 never joins
(rank 1 sleeps instead), so both go silent; on a later attempt both all-reduce, write
$JOB_OUT/attempt_<k>_rank_<r>.json and exit 0."""
import json
import os
import sys
import time

rank = int(os.environ["NODE_RANK"])
attempt = int(os.environ["AIR_ATTEMPT"])
print(f"rank {rank} attempt {attempt} starting", flush=True)

import torch  # noqa: E402  (imported after the first line: the import is slow and silent)
import torch.distributed as dist  # noqa: E402


def main():
    dist.init_process_group(backend="gloo", init_method="env://", rank=rank,
                            world_size=int(os.environ["NUM_NODES"]))
    value = torch.tensor([float(rank + 1)])
    if attempt == 0 and rank == 1:
        print("rank 1 will not join the all_reduce", flush=True)
        time.sleep(3600)
        sys.exit(3)
    print(f"rank {rank} entering all_reduce", flush=True)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    print(f"rank {rank} all_reduce sum {value.item():g}", flush=True)
    with open(os.path.join(os.environ["JOB_OUT"], f"attempt_{attempt}_rank_{rank}.json"),
              "w") as f:
        json.dump({"rank": rank, "attempt": attempt, "sum": value.item()}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
