"""Every kind of script a lower layer installs into its bin runs in the run's environment.

The lower layer is a venv at a path longer than a shebang may hold, so pip writes its entry
points as `#!/bin/sh` + `'''exec' "/base/python"` trampolines; it also gets a plain script
(wheel .data/scripts, what setup.py `scripts=` installs: pip rewrites its `#!python` to the
layer's interpreter) and a shell script. The run's `dependencies` venv is built on it. On the
node: the entry point and the plain script run the run's python (they import the run's
dependency), the shell script finds the run's python through PATH. Run directly, the layer's
own plain script cannot import the dependency (the test's control)."""
import os
import subprocess
import sys

from runtime_jobs.helpers import submit, wait_terminal, write_spec
from test_run_env import build_wheel

PLAIN = ("#!python\nimport sys\nimport airtestpkg\n"
         "print('plain script sees airtestpkg', airtestpkg.VALUE, sys.executable)\n")
MODULE = ("import sys\n\ndef main():\n    import airtestpkg\n"
          "    print('entry point sees airtestpkg', airtestpkg.VALUE, sys.executable)\n")
SHELL = '#!/bin/sh\necho "shell script python=$(command -v python)"\n'


def scripts_wheel(directory):
    data = "airscripts-0.1.data/scripts"
    return build_wheel(directory, name="airscripts", files={
        "airscripts/__init__.py": MODULE,
        f"{data}/air-plain-check": PLAIN,
        f"{data}/air-shell-check": SHELL,
        "airscripts-0.1.dist-info/entry_points.txt":
            "[console_scripts]\nair-ep-check = airscripts:main\n",
    }, executables={f"{data}/air-plain-check", f"{data}/air-shell-check"})


def test_every_script_kind_of_a_lower_layer_runs_in_the_runs_environment(air, air_home, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    base = tmp_path / ("base-layer-" + "x" * 130)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", base], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", base / "bin" / "python", "install",
                    "--disable-pip-version-check", "-q", scripts_wheel(tmp_path)], check=True)
    base_bin = base / "bin"
    # The kinds this test is about: a trampoline entry point and a plain script naming the
    # layer's python.
    assert (base_bin / "air-ep-check").read_text().startswith("#!/bin/sh\n'''exec' ")
    assert (base_bin / "air-plain-check").read_text().startswith(f"#!{base_bin}/python")
    # Control: the layer's own plain script runs the layer's python, without the dependency.
    control = subprocess.run([base_bin / "air-plain-check"], capture_output=True, text=True)
    assert control.returncode != 0 and "No module named 'airtestpkg'" in control.stderr

    monkeypatch.setenv("PATH", f"{base_bin}{os.pathsep}{os.environ['PATH']}")
    command = ("air-ep-check; air-plain-check; air-shell-check; "
               "for s in air-ep-check air-plain-check air-shell-check; do "
               'echo "which $s=$(command -v $s)"; done')
    spec = write_spec(tmp_path, command, nodes=1,
                      environment={"dependencies": [str(build_wheel(tmp_path))]})
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=300)
    logs = air("logs", run_id).stdout
    setup = (air_home / "runs" / str(run_id) / "setup.log").read_text()
    assert run["state"] == "SUCCEEDED", (run, logs, setup[-3000:])
    env_bin = next(p for p in (air_home / "envs").iterdir() if p.is_dir()) / "bin"
    assert f"entry point sees airtestpkg 42 {env_bin}/python" in logs, logs
    assert f"plain script sees airtestpkg 42 {env_bin}/python" in logs, logs
    assert f"shell script python={env_bin}/python" in logs, logs
    assert f"which air-ep-check={env_bin}/air-ep-check" in logs, logs
    assert f"which air-plain-check={env_bin}/air-plain-check" in logs, logs
    # A shell script names no interpreter: it stays the layer's, and finds python on PATH.
    assert f"which air-shell-check={base_bin}/air-shell-check" in logs, logs
    linked = next(l for l in setup.splitlines()
                  if l.startswith("air: ") and "other scripts of the layers below" in l)
    assert "air-plain-check" in linked.split(":", 1)[1].split(), linked
    assert "air-shell-check" not in linked, linked
