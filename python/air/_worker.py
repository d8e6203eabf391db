"""The rank side of a distributed call: `python -m air._worker`, started by torchrun on every
node of the air run (so the process has torchrun's whole environment: RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, ...). It loads the cloudpickled (function, args, kwargs) from the call
directory, calls the function, and writes the return value — or the exception with its
traceback — to the call directory for the caller to collect (files renamed into place, so the
caller never reads a partial one). Exits 0 only after its result is stored.
Thread safety: runs once per process on the main thread."""
import importlib.abc
import importlib.machinery
import json
import os
import select
import sys
import threading
import time
import traceback

from air._calldir import (CALL_INFO, PAYLOAD, STARTED_DIR, error_path, result_path,
                          write_atomic)


def _setup_sys_path(info: dict) -> None:
    """The caller's import path, with its working directory replaced by this node's copy of the
    code snapshot (CODE_SOURCE_PATH), which comes first."""
    code = os.environ.get("CODE_SOURCE_PATH")
    entries = [code] if code and info.get("code_dir") else []
    for entry in info.get("sys_path", []):
        if entry in ("", info.get("caller_cwd")):
            continue
        entries.append(entry)
    sys.path[:] = entries + [p for p in sys.path if p not in entries]


class _CudaBindingNoOp(importlib.abc.MetaPathFinder):
    """With gpu_type CPU on a host without CUDA: once torch is imported, torch.cuda.set_device
    does nothing, so GPU code's device binding line (`torch.cuda.set_device(LOCAL_RANK)`) runs
    unchanged on CPU ranks. Nothing else of torch changes."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch_set_device(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def _patch_set_device(torch) -> None:
    if not torch.cuda.is_available():
        torch.cuda.set_device = lambda device: None


def _install_cpu_mode() -> None:
    if "torch" in sys.modules:
        _patch_set_device(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _CudaBindingNoOp())


class _RankPrefix:
    """Prefixes every line this process (and any child it starts) writes to stdout and stderr
    with `[rank R] `: fds 1 and 2 become pipes that one thread each copies to the original
    descriptors, line by line, so the node's log (which air redacts) holds each line once with
    its rank. Nothing goes to any other file."""

    def __init__(self, rank: int):
        self._prefix = f"[rank {rank}] ".encode()
        self._saved = []
        self._threads = []
        for fd in (1, 2):
            read_end, write_end = os.pipe()
            original = os.dup(fd)
            os.dup2(write_end, fd)
            os.close(write_end)
            self._saved.append((fd, original))
            thread = threading.Thread(target=self._copy, args=(read_end, original), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _copy(self, read_end: int, original: int) -> None:
        pending = b""
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            _write_lines(original, [self._prefix + line + b"\n" for line in lines])
        if pending:
            _write_lines(original, [self._prefix + pending + b"\n"])
        os.close(read_end)

    def close(self) -> None:
        """Restores fds 1 and 2 and waits (briefly, in case a child still holds a pipe) for the
        last lines to be copied."""
        sys.stdout.flush()
        sys.stderr.flush()
        # Pointing fds 1 and 2 back at the originals closes the pipes' write ends, so each copier
        # reads to the end and writes its last lines to its original descriptor: that descriptor
        # may be closed only after its copier is done (closing it first lost the last lines).
        for fd, original in self._saved:
            os.dup2(original, fd)
        for (fd, original), thread in zip(self._saved, self._threads):
            thread.join(timeout=2)
            if not thread.is_alive():  # else a child still holds the pipe: leave it to exit
                os.close(original)


def _write_lines(fd: int, lines: list) -> None:
    """Writes whole lines in writes of at most PIPE_BUF bytes: every rank of a node (and
    torchrun) shares the node's output pipe, and only writes that small are atomic there, so a
    line is never split by another process's bytes (one 64 KiB write once was: `[rank 1]` and
    the rest of its line arrived apart). A single line longer than PIPE_BUF goes as it is."""
    batch = b""
    for line in lines:
        if batch and len(batch) + len(line) > select.PIPE_BUF:
            _write_all(fd, batch)
            batch = b""
        batch += line
    if batch:
        _write_all(fd, batch)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _error_record(kind: str, exc: BaseException, rank: int, message: str = "") -> dict:
    import cloudpickle
    tb = exc.__traceback__
    if kind == "raised" and tb is not None:
        tb = tb.tb_next  # start at the user's function, not at main()
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    try:
        pickled = cloudpickle.dumps(exc)
    except Exception:  # noqa: BLE001 - any failure means "send it as text"
        pickled = None
    return {"kind": kind, "rank": rank, "node": int(os.environ.get("GROUP_RANK", "0")),
            "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
            "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": message or str(exc), "traceback": text, "exception": pickled,
            "time": time.time()}


def _release_process_group() -> None:
    """Destroys the default process group the function left initialized (TRL/accelerate leave
    it so). Left to interpreter teardown, torch's gloo group can be destructed with its threads
    still joinable: std::terminate ("terminate called without an active exception", SIGABRT)
    after a successful run. Only where torch was imported; errors here change nothing."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - the run's outcome is already written
        pass


def main() -> int:
    prefix = _RankPrefix(int(os.environ["RANK"]))
    try:
        return _run()
    finally:
        _release_process_group()
        prefix.close()


def _run() -> int:
    call_dir = os.environ["AIRPY_CALL_DIR"]
    rank = int(os.environ["RANK"])
    attempt = int(os.environ.get("AIR_ATTEMPT", "0"))
    with open(os.path.join(call_dir, CALL_INFO), encoding="utf-8") as f:
        info = json.load(f)
    _setup_sys_path(info)
    if info.get("cpu"):
        _install_cpu_mode()
    import cloudpickle
    started = os.path.join(call_dir, STARTED_DIR, f"rank_{rank}")
    write_atomic(started, b"")

    def fail(record: dict) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        import pickle
        write_atomic(error_path(call_dir, rank, attempt), pickle.dumps(record))
        return 1

    try:
        with open(os.path.join(call_dir, PAYLOAD), "rb") as f:
            fn, args, kwargs = cloudpickle.load(f)
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        return fail(_error_record("load", exc, rank,
                                  f"the function could not be loaded on rank {rank}: "
                                  f"{type(exc).__name__}: {exc}"))
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: the caller sees it
        return fail(_error_record("raised", exc, rank))
    try:
        data = cloudpickle.dumps(value)
    except BaseException as exc:  # noqa: BLE001
        return fail(_error_record(
            "result", exc, rank,
            f"rank {rank}'s return value ({type(value).__module__}.{type(value).__qualname__}) "
            f"cannot be serialized with cloudpickle: {type(exc).__name__}: {exc}"))
    write_atomic(result_path(call_dir, rank, attempt), data)
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
