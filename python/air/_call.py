"""One distributed call, start to end: serialize the call, stage it in a call directory, submit a
generated workload with `air run -o json`, stream every rank's output, wait for the run to end,
then return the per-rank values (ordered by rank) or re-raise the failing rank's exception.
Ctrl-C cancels the run with `air cancel` (which returns once every node's processes are gone).

The call directory (default AIR_HOME/python-calls/<id>/, which every node of an air backend
sees) holds payload.pkl, call.json, spec.json and the ranks' started/ and results/ files; it is
removed when the call returns. The code snapshot is the caller's working directory (code_dir),
without virtualenvs, __pycache__, .git and what .gitignore excludes (air's snapshot rules).
Each rank runs under `air launch` (torchrun's worker environment, started without importing
torch: a trivial call starts as fast as torch.multiprocessing.spawn). Errors air reports about
the generated workload are phrased for the caller: the option or path at fault, not spec.json.
Thread safety: one call per thread; concurrent calls use separate call directories."""
import contextlib
import json
import math
import os
import pickle
import re
import shlex
import shutil
import signal
import sys
import threading
import time
import uuid

import cloudpickle

from . import _calldir
from ._binary import AirBinary
from ._errors import (AirCommandError, CallerError, DistributedError, RemoteError,
                      RemoteTraceback, SerializationError)
from ._follow import LogFollower
from ._serialize import dumps_call

_TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELED", "INTERNAL_ERROR"}
_DEFAULT_MAX_CODE_MB = 1024  # air's code_source.snapshot.max_size_mb default
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class DistributedResult(list):
    """The per-rank return values, ordered by rank; `run_id` is the air run (for `air logs RUN`
    and `air get RUN`)."""

    run_id = None
    timings = None  # where the call's time went (run_call's docstring)


def _staging_root() -> str:
    home = os.environ.get("AIR_HOME") or os.path.join(os.path.expanduser("~"), ".air")
    return os.path.join(home, "python-calls")


def _experiment_name(fn) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]", "_", getattr(fn, "__name__", "") or "")[:100]
    return name or "distributed"


def _command(shape) -> str:
    """Every node runs `air launch` (air's torchrun: the same worker environment and store,
    without a Python launcher importing torch first), which starts LOCAL_WORLD_SIZE workers of
    the caller's interpreter."""
    python = shlex.quote(sys.executable)
    return ("exec \"$AIR_BIN\" launch --nnodes=\"$NUM_NODES\" --node-rank=\"$NODE_RANK\" "
            "--nproc-per-node=\"$LOCAL_WORLD_SIZE\" --master-addr=\"$MASTER_ADDR\" "
            "--master-port=\"$MASTER_PORT\" --max-restarts=0 --monitor-interval=0.05 "
            f"--no-python {python} -u -m air._worker\n")


def build_spec(fn, options, call_dir: str, token: str) -> dict:
    """The workload (as JSON, which is YAML) that runs _worker on every rank."""
    shape = options.shape
    env = {"AIRPY_CALL_DIR": call_dir,
           "PYTHONPATH": os.pathsep.join(
               p for p in [_PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")] if p)}
    if shape.per_node > 1 and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = "1"  # torchrun's own default, without its banner
    env.update(options.env)
    spec = {"experiment_name": options.experiment_name or _experiment_name(fn),
            "compute": {"accelerator_type": shape.accelerator_type,
                        "num_accelerators": shape.num_accelerators},
            "command": _command(shape),
            "env_variables": env,
            "max_retries": options.max_retries,
            "idempotency_token": token}
    if options.code_dir is not None:
        snapshot = {"root_path": os.path.abspath(options.code_dir)}
        if options.code_include:
            snapshot["include_paths"] = list(options.code_include)
        if options.max_code_mb is not None:
            snapshot["max_size_mb"] = options.max_code_mb
        spec["code_source"] = {"type": "snapshot", "snapshot": snapshot}
    if options.secrets:
        spec["secrets"] = dict(options.secrets)
    if options.timeout is not None:
        spec["timeout_minutes"] = max(1, math.ceil(options.timeout / 60))
    return spec


@contextlib.contextmanager
def _sigint_deferred():
    """Holds back Ctrl-C while a short air command runs (so a submit or a cancel is never cut
    in half), then raises KeyboardInterrupt if one arrived."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hit = []
    previous = signal.signal(signal.SIGINT, lambda *_: hit.append(1))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit:
        raise KeyboardInterrupt


def _progress(run_id, started_dir: str, world: int, shown: list) -> None:
    try:
        count = len(os.listdir(started_dir))
    except OSError:
        return
    if count != shown[0] and (count == world or time.monotonic() - shown[1] >= 1.0):
        shown[0], shown[1] = count, time.monotonic()
        print(f"[air] run {run_id}: {count}/{world} ranks running", file=sys.stderr, flush=True)


def _for_caller(errors: list, options) -> str:
    """air's diagnostics about the generated workload, each naming the @distributed option (or
    the caller's path) at fault instead of a line of spec.json."""
    lines = []
    for error in errors:
        field, message = error.get("field", ""), error.get("message", "")
        m = re.fullmatch(r"code_source\.snapshot\.include_paths\[(\d+)\]", field)
        if field in ("code_source", "code_source.snapshot", "code_source.snapshot.root_path"):
            where = f"code_dir={options.code_dir!r}"
        elif m:
            i = int(m.group(1))
            where = f"code_include[{i}]={list(options.code_include)[i]!r}"
        elif field == "code_source.snapshot.max_size_mb":
            limit = options.max_code_mb
            where = f"max_code_mb={limit}" if limit is not None else (
                f"code_dir={options.code_dir!r} (max_code_mb, default {_DEFAULT_MAX_CODE_MB})")
            message = message.replace("max_size_mb", "max_code_mb").replace(
                "or include_paths", "or code_include=[...]")
        elif field.startswith("env_variables."):
            where = f"env[{field.split('.', 1)[1]!r}]"
        elif field.startswith("secrets."):
            where = f"secrets[{field.split('.', 1)[1]!r}]"
        elif field == "timeout_minutes":
            where = f"timeout={options.timeout!r}"
        elif field == "max_retries":
            where = f"max_retries={options.max_retries!r}"
        elif field == "experiment_name":
            where = f"experiment_name={options.experiment_name!r}"
        else:
            where = field or "the call"
        message = message.replace("include_paths", "code_include").replace("root_path",
                                                                           "code_dir")
        lines.append(f"@distributed: {where}: {message}")
    return "\n".join(lines) + "\nnothing was started"


def run_call(fn, options, args: tuple, kwargs: dict, on_submit=None) -> DistributedResult:
    """Runs fn(*args, **kwargs) on every rank; on_submit(run_id) once the run exists. The
    result's `timings` says where the time went (wall-clock seconds since the epoch: call,
    prepared, submitted, ranks_running, ended, returned)."""
    timings = {"call": time.time()}
    binary = AirBinary.find()
    payload = dumps_call(fn, args, kwargs)
    shape = options.shape
    token = uuid.uuid4().hex
    root = options.staging_dir or _staging_root()
    call_dir = os.path.join(os.path.abspath(root), token)
    os.makedirs(os.path.join(call_dir, _calldir.STARTED_DIR))
    os.makedirs(os.path.join(call_dir, _calldir.RESULTS_DIR))
    try:
        with open(os.path.join(call_dir, _calldir.PAYLOAD), "wb") as f:
            f.write(payload)
        del payload
        info = {"sys_path": [p for p in sys.path if isinstance(p, str)],
                "caller_cwd": os.getcwd(), "code_dir": options.code_dir is not None,
                "cpu": shape.cpu}
        with open(os.path.join(call_dir, _calldir.CALL_INFO), "w", encoding="utf-8") as f:
            json.dump(info, f)
        spec_path = os.path.join(call_dir, "spec.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(build_spec(fn, options, call_dir, token), f, indent=1)
        run_args = ["run", "-f", spec_path]
        if not options.remote and "--backend" in binary.run_flags:
            run_args += ["--backend", "local"]
        timings["prepared"] = time.time()
        with _sigint_deferred():
            try:
                submitted = binary.json(*run_args)
            except AirCommandError as exc:
                if exc.details.get("errors"):
                    raise CallerError(_for_caller(exc.details["errors"], options),
                                      code=exc.code, details=exc.details) from None
                if not shape.cpu and "GPU(s)" in str(exc):
                    exc.args = (f"{exc}; with @distributed, gpu_type='CPU' or 'CPU_<n>' runs the "
                                f"ranks as CPU processes",)
                raise
        run_id = submitted["run_id"]
        timings["submitted"] = time.time()
        if on_submit:
            on_submit(run_id)
        print(f"[air] run {run_id} submitted: {shape.num_nodes} node(s) x {shape.per_node} "
              f"rank(s) ({shape.accelerator_type}); `air logs {run_id}` and `air get {run_id}` "
              f"show it", file=sys.stderr, flush=True)
        result = _watch(binary, run_id, shape, call_dir, timings)
    finally:
        shutil.rmtree(call_dir, ignore_errors=True)
    timings["returned"] = time.time()
    result.timings = timings
    return result


def _watch(binary, run_id: int, shape, call_dir: str, timings: dict) -> DistributedResult:
    follower = LogFollower(binary, run_id, shape.num_nodes)
    started_dir = os.path.join(call_dir, _calldir.STARTED_DIR)
    shown = [0, 0.0]
    try:
        while not follower.done:
            follower.pump(0.05)
            _progress(run_id, started_dir, shape.num_accelerators, shown)
            if shown[0] == shape.num_accelerators and "ranks_running" not in timings:
                timings["ranks_running"] = time.time()
        timings["ended"] = time.time()
        run = binary.json("get", run_id)
        while run["state"] not in _TERMINAL:  # a follower ended early (its error is kept)
            time.sleep(0.2)
            run = binary.json("get", run_id)
    except KeyboardInterrupt:
        print(f"[air] interrupted: canceling run {run_id}", file=sys.stderr, flush=True)
        with _sigint_deferred():
            binary.json("cancel", run_id)
        raise
    finally:
        follower.stop()
    return _outcome(run, shape, call_dir)


def _outcome(run: dict, shape, call_dir: str) -> DistributedResult:
    run_id = run["run_id"]
    attempt = max(0, run.get("attempts", 1) - 1)
    if run["state"] == "SUCCEEDED":
        values = DistributedResult()
        values.run_id = run_id
        for rank in range(shape.num_accelerators):
            path = _calldir.result_path(call_dir, rank, attempt)
            try:
                with open(path, "rb") as f:
                    values.append(cloudpickle.load(f))
            except FileNotFoundError:
                raise DistributedError(f"air run {run_id} SUCCEEDED but rank {rank} stored no "
                                       f"result", run_id) from None
            except Exception as exc:  # noqa: BLE001 - e.g. a class the caller cannot import
                raise SerializationError(
                    f"rank {rank}'s return value could not be loaded in the caller: "
                    f"{type(exc).__name__}: {exc} (air run {run_id})", run_id) from exc
        return values
    _raise_rank_error(run, shape, call_dir, attempt)
    summary = run.get("failure_summary") or ""
    raise DistributedError(f"air run {run_id} ended {run['state']}"
                           + (f": {summary}" if summary else ""), run_id)


def _raise_rank_error(run: dict, shape, call_dir: str, attempt: int) -> None:
    """Re-raises the first (earliest) exception a rank of `attempt` stored, if any."""
    records = []
    for rank in range(shape.num_accelerators):
        try:
            with open(_calldir.error_path(call_dir, rank, attempt), "rb") as f:
                records.append(pickle.load(f))
        except FileNotFoundError:
            continue
    if not records:
        return
    record = min(records, key=lambda r: r["time"])
    run_id, rank = run["run_id"], record["rank"]
    where = (f"rank {rank} of {shape.num_accelerators} (node {record['node']}, local rank "
             f"{record['local_rank']}), air run {run_id}")
    cause = RemoteTraceback(f'\n"""\nraised on {where}:\n{record["traceback"]}"""')
    if record["kind"] == "result":
        raise SerializationError(f"{record['message']} ({where})", run_id) from cause
    if record["kind"] == "load":
        raise DistributedError(f"{record['message']} ({where})", run_id) from cause
    exc = None
    if record["exception"] is not None:
        try:
            exc = cloudpickle.loads(record["exception"])
        except Exception:  # noqa: BLE001 - fall back to RemoteError below
            exc = None
    if not isinstance(exc, BaseException):
        exc = RemoteError(f"{record['type']}: {record['message']} (raised on {where})", rank,
                          record["type"], run_id)
    exc.rank = rank
    exc.run_id = run_id
    if hasattr(exc, "add_note"):
        exc.add_note(f"[air] raised on {where}; the remote traceback is above")
    raise exc from cause
