"""Finding and driving the `air` binary: every runtime action of this package is one `air -o json`
command (run, logs --follow, get, cancel), so the Python side never re-implements the runtime.
Thread safety: AirBinary is immutable; its methods may be called from any thread."""
import functools
import json
import os
import shutil
import subprocess

from ._errors import AirCommandError, AirNotFoundError

_INSTALL_HINT = (
    "set AIR_BIN to the path of the air executable, or put `air` on PATH; in the air "
    "repository, scripts/setup.sh builds it at build/bin/air")


class AirBinary:
    """One `air` executable, found from AIR_BIN or PATH."""

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def find(cls) -> "AirBinary":
        path = os.environ.get("AIR_BIN")
        if path:
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise AirNotFoundError(
                    f"AIR_BIN={path} is not an executable file; nothing was started. "
                    + _INSTALL_HINT)
            return cls(os.path.abspath(path))
        found = shutil.which("air")
        if not found:
            raise AirNotFoundError(
                "the air binary was not found (AIR_BIN is unset and no `air` on PATH); nothing "
                "was started. " + _INSTALL_HINT)
        return cls(found)

    def argv(self, *args) -> list:
        return [self.path, "-o", "json", *map(str, args)]

    def json(self, *args, timeout=None) -> dict:
        """Runs `air -o json ARGS` to its end: the envelope's data, or AirCommandError."""
        proc = subprocess.run(self.argv(*args), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        return parse_envelope(proc.stdout, proc.stderr, proc.returncode, args)

    @functools.cached_property
    def run_flags(self) -> str:
        """`air run --help` (to learn whether this build has --backend)."""
        proc = subprocess.run([self.path, "run", "--help"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        return proc.stdout + proc.stderr


def parse_envelope(stdout: str, stderr: str, returncode: int, args) -> dict:
    """The `data` of the last envelope on stdout; AirCommandError for an `error` envelope or
    output that is not one."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    envelope = None
    if lines:
        try:
            envelope = json.loads(lines[-1])
        except ValueError:
            envelope = None
    command = "air " + " ".join(map(str, args))
    if not isinstance(envelope, dict):
        raise AirCommandError(f"`{command}` exited {returncode} without a JSON result: "
                              f"{(stderr or stdout).strip()[-2000:]}", code="no_envelope")
    if "error" in envelope:
        err = envelope["error"]
        raise AirCommandError(f"`{command}` failed: {err.get('message', err)}",
                              code=err.get("code", ""), details=err)
    return envelope.get("data", {})
