"""The exceptions this package raises. A rank's own exception is re-raised as itself (same type,
same message) with a RemoteTraceback as its __cause__, the way concurrent.futures shows a worker
process's traceback; the classes here cover what is air's to report.
Thread safety: plain exception classes."""


class DistributedError(RuntimeError):
    """A distributed call failed for a reason that is not a rank's own exception (the run ended
    FAILED, TIMED_OUT or CANCELED without one, or air reported an error)."""

    def __init__(self, message: str, run_id=None):
        super().__init__(message)
        self.run_id = run_id


class AirNotFoundError(DistributedError, FileNotFoundError):
    """No `air` executable: says how to install it or point at it."""


class AirCommandError(DistributedError):
    """An `air -o json` command returned an error envelope (code: air's error code)."""

    def __init__(self, message: str, code: str = "", details=None):
        super().__init__(message)
        self.code = code
        self.details = details or {}


class CallerError(AirCommandError, ValueError):
    """air refused the workload a call generated because of something the caller gave (an
    option, the code directory): the message names that option or path, never the generated
    spec, and says that nothing was started."""


class SerializationError(DistributedError, TypeError):
    """An argument, the function, or a rank's return value cannot be serialized with
    cloudpickle; the message names which one."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised on a rank, as text (the __cause__ of the re-raised
    exception, so it prints above it)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self):
        return self.text


class RemoteError(DistributedError):
    """Stands in for a rank's exception that could not be sent back as itself (not
    picklable); its message is that exception's type and text."""

    def __init__(self, message: str, rank: int, type_name: str, run_id=None):
        super().__init__(message, run_id)
        self.rank = rank
        self.type_name = type_name
