"""Peak memory of one benchmark side, measured the same way for every side.

On a GPU: `nvidia-smi --query-gpu=memory.used -i GPU` every 0.2 s from a background thread
while the side's process runs; the side's peak is the largest reading minus the idle reading
taken just before it started (so the CUDA context, the caching allocator's reserve and
cuBLAS/NCCL workspaces all count, for air and PyTorch alike). A sampler can miss a spike shorter
than 0.2 s; the torch sides also report torch.cuda.max_memory_allocated for that reason.
On the CPU (--device cpu smoke mode): the resident set of the side's process tree (psutil),
sampled the same way, with 0 as the baseline.
"""
import subprocess
import threading
import time

GIB = 1024.0 ** 3


def gpu_used_bytes(gpu):
    """The GPU's memory.used as nvidia-smi reports it, in bytes (None when it cannot be read)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                              "--format=csv,noheader,nounits", "-i", str(gpu)],
                             capture_output=True, text=True, timeout=10)
        return int(out.stdout.strip().splitlines()[0]) * 1024 * 1024
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def tree_rss_bytes(pid):
    """Resident bytes of process `pid` and its descendants (None once it is gone)."""
    try:
        import psutil
        root = psutil.Process(pid)
        total = 0
        for proc in [root] + root.children(recursive=True):
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        return total
    except Exception:  # psutil missing or the process gone
        return None


def gpu_info(gpu):
    """(name, driver, total MiB) from nvidia-smi, or None when there is no nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader,nounits", "-i", str(gpu)],
                             capture_output=True, text=True, timeout=20)
        name, driver, total = [f.strip() for f in out.stdout.strip().split(",")]
        return name, driver, int(total)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def wait_for_idle(gpu, idle_bytes, slack=512 * 1024 * 1024, timeout=60.0):
    """After a side's process exits the driver frees its memory a moment later: wait (up to
    `timeout` s) until memory.used is back within `slack` of the machine's idle reading, and
    return the reading then (the next side's baseline)."""
    deadline = time.monotonic() + timeout
    used = gpu_used_bytes(gpu)
    while used is not None and used > idle_bytes + slack and time.monotonic() < deadline:
        time.sleep(0.5)
        used = gpu_used_bytes(gpu)
    return used


class PeakSampler:
    """Samples memory every `interval` s in a thread between start() and stop(); `peak_bytes`
    is the largest reading minus the baseline (None if nothing could be read)."""

    def __init__(self, device, gpu=0, baseline=None, interval=0.2):
        """`baseline`: the GPU's idle memory.used (bytes) before the side; None reads it at
        start(). On the CPU the baseline is 0."""
        self.device, self.gpu, self.interval = device, gpu, interval
        self.baseline, self.peak, self.pid = baseline, None, None
        self._stop = threading.Event()
        self._thread = None

    def _read(self):
        if self.device == "cuda":
            return gpu_used_bytes(self.gpu)
        return tree_rss_bytes(self.pid) if self.pid else None

    def start(self, pid=None):
        """Begin sampling (on the CPU, the tree of `pid`; set_pid may name it later)."""
        self.pid = pid
        if self.device != "cuda":
            self.baseline = 0
        elif self.baseline is None:
            self.baseline = gpu_used_bytes(self.gpu) or 0
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def set_pid(self, pid):
        self.pid = pid
        self._sample()  # at once: a short-lived process may be gone before the next tick

    def _sample(self):
        value = self._read()
        if value is not None:
            self.peak = value if self.peak is None else max(self.peak, value)

    def _loop(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.peak_bytes

    @property
    def peak_bytes(self):
        return None if self.peak is None else max(0, self.peak - self.baseline)
