"""air's Python API: `@distributed` runs a function on every rank of an air run (see
docs/python.md). `serverless_gpu.distributed` is the same object."""
from ._call import DistributedResult
from ._decorator import DistributedFunction, distributed
from ._errors import (AirCommandError, AirNotFoundError, CallerError, DistributedError,
                      RemoteError, RemoteTraceback, SerializationError)
from ._shapes import KNOWN_GPU_TYPES

__all__ = ["distributed", "DistributedFunction", "DistributedResult", "DistributedError",
           "AirNotFoundError", "AirCommandError", "CallerError", "SerializationError", "RemoteError",
           "RemoteTraceback", "KNOWN_GPU_TYPES"]
