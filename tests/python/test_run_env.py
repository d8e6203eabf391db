"""environment.dependencies end to end: a venv built once per dependency list, first on the
command's PATH, reused by the next run; packages of the interpreter that built it stay
importable (like a base image's)."""
import base64
import hashlib
import os
import zipfile

from runtime_jobs.helpers import explain, submit, wait_terminal, write_spec


def build_wheel(directory, name="airtestpkg", version="0.1", value=42, files=None,
                executables=()):
    """A minimal pure-Python wheel, so pip can install it without any network. `files` (path ->
    text) replaces the default package; paths in `executables` are stored as executable."""
    files = dict(files) if files is not None else {f"{name}/__init__.py": f"VALUE = {value}\n"}
    files.update({
        f"{name}-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: air-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    })
    record = f"{name}-{version}.dist-info/RECORD"
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    lines.append(f"{record},,")
    files[record] = "\n".join(lines) + "\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            info = zipfile.ZipInfo(path)
            info.external_attr = (0o100755 if path in executables else 0o100644) << 16
            z.writestr(info, text)
    return wheel


def test_dependencies_build_a_venv_once_and_reuse_it(air, air_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    wheel = build_wheel(tmp_path)
    command = ('python -c "import airtestpkg, sys; '
               'print(\'VALUE\', airtestpkg.VALUE, sys.prefix)"; '
               'echo "PATH=$PATH"')
    spec = write_spec(tmp_path, command, nodes=2,
                      environment={"dependencies": [str(wheel)]})
    first = submit(air, spec)
    run = wait_terminal(air, first, timeout=180)
    logs = air("logs", first, "--node", 1, check=True).stdout
    assert run["state"] == "SUCCEEDED", explain(run, logs)
    envs = [p for p in (air_home / "envs").iterdir() if p.is_dir()]
    assert len(envs) == 1
    assert f"VALUE 42 {envs[0]}" in logs
    assert f"PATH={envs[0]}/bin:" in logs
    setup = (air_home / "runs" / str(first) / "setup.log").read_text()
    assert "building Python environment" in setup

    second = submit(air, spec)
    assert wait_terminal(air, second, timeout=60)["state"] == "SUCCEEDED"
    setup2 = (air_home / "runs" / str(second) / "setup.log").read_text()
    assert "reusing Python environment" in setup2 and "pip" not in setup2
    assert [p for p in (air_home / "envs").iterdir() if p.is_dir()] == envs
