"""Writes this worker's environment to $JOB_OUT/<RANK>.json (for comparing launchers)."""
import json
import os

with open(os.path.join(os.environ["JOB_OUT"], f"{os.environ['RANK']}.json"), "w") as f:
    json.dump(dict(os.environ), f)
