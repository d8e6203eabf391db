"""Streams every node's log of a live air run to the caller, one `air -o json logs RUN --node N
--follow` per node. A rank's lines already start with `[rank R] ` (the worker writes them so,
_worker.py); lines torchrun or air print themselves are shown as `[node n]` / `[air node n]`.
Thread safety: one reader thread per node feeds a queue; only the caller's thread prints, so
output lands in the right notebook cell."""
import json
import queue
import re
import subprocess
import sys
import threading

_RANK_PREFIX = re.compile(r"\[rank \d+\] ")


def render(record: dict, node: int):
    """(text, stream) for one log record of `node`, or None for a record not to show."""
    stream = record.get("stream", "out")
    text = record.get("text", "")
    if stream == "setup":
        return (f"[air setup] {text}", "err") if node == 0 else None
    if stream == "air":
        return f"[air node {node}] {text}", "err"
    if _RANK_PREFIX.match(text):
        return text, stream
    return f"[node {node}] {text}", stream


class LogFollower:
    """Follows all nodes of one run until it ends (or stop())."""

    def __init__(self, binary, run_id: int, num_nodes: int):
        self._queue = queue.Queue()
        self._procs = []
        self._open = num_nodes
        self.errors = []
        for node in range(num_nodes):
            proc = subprocess.Popen(
                binary.argv("logs", run_id, "--node", node, "--follow"), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
            self._procs.append(proc)
            threading.Thread(target=self._read, args=(node, proc), daemon=True).start()

    def _read(self, node: int, proc) -> None:
        for raw in proc.stdout:
            try:
                envelope = json.loads(raw)
            except ValueError:
                continue
            if "error" in envelope:
                self._queue.put(("error", node, envelope["error"].get("message", "")))
            else:
                self._queue.put(("line", node, envelope.get("data", {})))
        proc.wait()
        self._queue.put(("eof", node, proc.stderr.read().decode(errors="replace")))

    @property
    def done(self) -> bool:
        return self._open == 0

    def pump(self, timeout: float) -> None:
        """Prints what arrived within `timeout` seconds (on the calling thread)."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return
        while True:
            kind, node, payload = item
            if kind == "line":
                shown = render(payload, node)
                if shown:
                    out = sys.stderr if shown[1] == "err" else sys.stdout
                    print(shown[0], file=out, flush=True)
            elif kind == "error":
                self.errors.append(f"node {node}: {payload}")
            else:
                self._open -= 1
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
