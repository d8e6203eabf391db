"""The seed system's spelling of air's Python API: `from serverless_gpu import distributed`
gives air's own decorator (the same object as `air.distributed`)."""
from air import distributed

__all__ = ["distributed"]
