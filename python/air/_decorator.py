"""`@distributed(gpus=N, gpu_type=..., remote=...)`: the decorator and the wrapper it returns.
`wrapper.distributed(*args, **kwargs)` runs the function once per rank through air and returns
the per-rank values as a list ordered by rank; calling the wrapper itself runs the function here,
once, like the undecorated function. Options are checked when the decorator is applied, so bad
input is an error before anything runs.
Thread safety: a wrapper may be called from several threads; each call is independent
(last_run_id is the latest submitted)."""
import dataclasses
import functools
import os
import re
from typing import Optional

from ._shapes import Shape, resolve_shape

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_PART = r"[A-Za-z0-9._-]{1,128}"
_SECRET_REF = re.compile(f"{_SECRET_PART}/{_SECRET_PART}")
_CWD = object()  # code_dir default: the working directory at call time


@dataclasses.dataclass
class Options:
    shape: Shape
    remote: bool
    timeout: Optional[float]
    max_retries: int
    env: dict
    secrets: dict
    code_dir: object
    experiment_name: Optional[str]
    staging_dir: Optional[str]
    code_include: tuple = ()
    max_code_mb: Optional[int] = None


def _check_code_options(code_dir, code_include, max_code_mb) -> None:
    if code_dir is not _CWD and code_dir is not None:
        if not isinstance(code_dir, (str, os.PathLike)):
            raise TypeError(f"@distributed: code_dir must be a directory path or None, got "
                            f"{code_dir!r}")
        if not os.path.isdir(code_dir):
            raise ValueError(f"@distributed: code_dir={os.fspath(code_dir)!r} is not an existing "
                             f"directory")
    if code_include is not None:
        if isinstance(code_include, (str, os.PathLike)) or not hasattr(code_include, "__iter__"):
            raise TypeError(f"@distributed: code_include must be a list of paths relative to "
                            f"code_dir, got {code_include!r}")
        for i, path in enumerate(code_include):
            if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
                raise TypeError(f"@distributed: code_include[{i}] must be a non-empty path, got "
                                f"{path!r}")
            text = os.fspath(path)
            if os.path.isabs(text) or ".." in text.replace(os.sep, "/").split("/"):
                raise ValueError(f"@distributed: code_include[{i}]={text!r} must be relative to "
                                 f"code_dir and stay inside it (no '..')")
        if code_dir is None and code_include:
            raise ValueError("@distributed: code_include needs a code_dir (it is None: no code "
                             "is sent)")
    if max_code_mb is not None and (isinstance(max_code_mb, bool)
                                    or not isinstance(max_code_mb, int) or max_code_mb < 1):
        raise ValueError(f"@distributed: max_code_mb is the largest code snapshot in MiB, an "
                         f"integer >= 1, got {max_code_mb!r}")


def _check_options(remote, timeout, max_retries, env, secrets, experiment_name) -> None:
    if not isinstance(remote, bool):
        raise TypeError(f"@distributed: remote must be True or False, got {remote!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0):
        raise ValueError(f"@distributed: timeout is seconds, a number > 0 (or None), got "
                         f"{timeout!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or not (
            0 <= max_retries <= 1000):
        raise ValueError(f"@distributed: max_retries must be an integer 0 to 1000, got "
                         f"{max_retries!r}")
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ValueError(f"@distributed: env name {name!r} is not valid: letters, digits "
                             f"and _, not starting with a digit")
        if not isinstance(value, str):
            raise TypeError(f"@distributed: env[{name!r}] must be a string, got {value!r}")
    for name, ref in (secrets or {}).items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ValueError(f"@distributed: secrets name {name!r} is not a valid variable name")
        if not isinstance(ref, str) or not _SECRET_REF.fullmatch(ref):
            raise ValueError(f"@distributed: secrets[{name!r}] must be an air secret reference "
                             f"'scope/key' (see `air secrets`), got {ref!r}")
    if experiment_name is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,100}",
                                                        str(experiment_name)):
        raise ValueError(f"@distributed: experiment_name {experiment_name!r}: letters, digits, - "
                         f"and _, 1 to 100 characters")


class DistributedFunction:
    """What @distributed returns: call it for one local run, `.distributed()` for all ranks."""

    def __init__(self, fn, options: Options):
        if not callable(fn):
            raise TypeError(f"@distributed decorates a function, got {fn!r}")
        self._fn = fn
        self._options = options
        self._last_run_id = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def distributed(self, *args, **kwargs):
        """Runs the function on every rank; returns the values as a list ordered by rank (its
        `run_id` attribute is the air run). A rank's exception is re-raised here."""
        from ._call import run_call
        options = dataclasses.replace(self._options)
        if options.code_dir is _CWD:
            options.code_dir = os.getcwd()
        elif options.code_dir is not None:
            options.code_dir = os.fspath(options.code_dir)

        def submitted(run_id: int) -> None:
            self._last_run_id = run_id

        return run_call(self._fn, options, args, kwargs, submitted)

    @property
    def last_run_id(self) -> Optional[int]:
        """The air run id of the latest .distributed() call (also while it runs)."""
        return self._last_run_id

    @property
    def shape(self) -> Shape:
        return self._options.shape

    def __repr__(self):
        s = self._options.shape
        return (f"<distributed {getattr(self._fn, '__qualname__', self._fn)}: "
                f"{s.num_accelerators} rank(s) as {s.num_nodes} x {s.accelerator_type}>")


def distributed(gpus=1, gpu_type="H100", remote=True, *, timeout=None, max_retries=0, env=None,
                secrets=None, code_dir=_CWD, code_include=None, max_code_mb=None,
                experiment_name=None, staging_dir=None):
    """Decorator: run the function once per rank through air.

    gpus: the number of ranks (world size). gpu_type: 'H100', 'H200', 'A10', or 'CPU' (all ranks
    on one node as CPU processes, gloo) / 'CPU_<n>' (n CPU ranks per node). remote: True submits
    to air's configured backend; False runs on this machine (air's local backend).
    timeout: seconds per attempt (air counts whole minutes, rounded up). max_retries: whole-run
    retries (default 0). env: extra environment variables. secrets: {NAME: 'scope/key'} air
    secret references, resolved at launch. code_dir: the directory sent to every node as the
    code snapshot and put first on sys.path (default: the working directory; None: none):
    without virtualenvs (folders holding pyvenv.cfg), __pycache__, .git and what .gitignore
    excludes. code_include: only these paths of code_dir (relative). max_code_mb: the largest
    snapshot accepted (air's default 1024 MiB); a larger one is refused naming its largest
    entries. experiment_name: default the function's name. staging_dir: where the call's files live
    (default AIR_HOME/python-calls; nodes must see it)."""
    if callable(gpus) and not isinstance(gpus, (int, bool)):
        return distributed()(gpus)  # bare @distributed
    shape = resolve_shape(gpus, gpu_type)
    _check_options(remote, timeout, max_retries, env, secrets, experiment_name)
    _check_code_options(code_dir, code_include, max_code_mb)
    options = Options(shape, remote, timeout, max_retries, dict(env or {}), dict(secrets or {}),
                      code_dir, experiment_name, staging_dir,
                      tuple(os.fspath(p) for p in (code_include or ())), max_code_mb)

    def decorate(fn):
        return DistributedFunction(fn, dataclasses.replace(options))

    return decorate
