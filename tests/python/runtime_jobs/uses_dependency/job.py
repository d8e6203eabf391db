"""A torchrun worker that imports a package only the run's `dependencies` install: it runs only
when torchrun itself runs in the run's environment."""
import os
import sys

import airtestpkg
import torch.distributed as dist

dist.init_process_group(backend="gloo")
print(f"rank {dist.get_rank()} imported airtestpkg {airtestpkg.VALUE} with {sys.executable}",
      flush=True)
dist.destroy_process_group()
