"""What a @distributed call's code snapshot holds, from a project folder as people have it:
a `.venv/` made by the real `python -m venv` (its bin/python links outside the folder), a
`__pycache__`, a `.git`, ignored files. The call runs, the ranks import the folder's own module
and see none of those; too large a folder is refused before anything runs, naming its largest
entries and the option to change; errors name the option or path the caller gave, never the
generated spec."""
import os
import subprocess
import sys

import pytest

from distributed_fixtures.helpers import call_dirs, py_env, runs_in  # noqa: F401

import air


def list_code():
    """On a rank: the files of the node's copy of the code, and the project module's answer."""
    import os as _os
    import helper_mod
    root = _os.environ["CODE_SOURCE_PATH"]
    found = sorted(_os.path.relpath(_os.path.join(d, f), root)
                   for d, dirs, files in _os.walk(root) for f in files)
    return helper_mod.ANSWER, found


def test_a_folder_holding_a_venv_runs_and_the_venv_stays_home(py_env, air_bin, air_home):  # noqa: F811
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(py_env / ".venv")],
                   check=True, timeout=120)
    assert os.path.islink(py_env / ".venv" / "bin" / "python")
    (py_env / "helper_mod.py").write_text("ANSWER = 42\n")
    (py_env / "__pycache__").mkdir()
    (py_env / "__pycache__" / "helper_mod.cpython-311.pyc").write_bytes(b"stale")
    (py_env / ".git").mkdir()
    (py_env / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (py_env / ".gitignore").write_text("outputs/\n")
    (py_env / "outputs").mkdir()
    (py_env / "outputs" / "big.bin").write_bytes(b"x" * 1000)
    fn = air.distributed(gpus=2, gpu_type="CPU", remote=False)(list_code)
    result = fn.distributed()
    assert [answer for answer, _ in result] == [42, 42]
    files = result[0][1]
    assert files == [".gitignore", "helper_mod.py"], files
    assert call_dirs(air_home) == []


def test_too_large_a_folder_is_refused_naming_its_largest_entries(py_env, air_bin, air_home):  # noqa: F811
    (py_env / "train.py").write_text("print(1)\n")
    (py_env / "data").mkdir()
    with open(py_env / "data" / "shard.bin", "wb") as f:
        f.truncate(3 << 20)  # sparse: 3 MiB in size, nothing on disk
    fn = air.distributed(gpus=1, gpu_type="CPU", remote=False, max_code_mb=2)(len)
    with pytest.raises(air.CallerError) as excinfo:
        fn.distributed("abc")
    message = str(excinfo.value)
    assert message.startswith("@distributed: max_code_mb=2: the snapshot of "), message
    assert "over its limit of 2.0 MiB (max_code_mb 2)" in message, message
    assert "the largest entries: data/ 3.0 MiB, train.py 9 B" in message, message
    assert "code_include=[...]" in message and "raise max_code_mb" in message, message
    assert "spec.json" not in message and "include_paths" not in message, message
    assert message.endswith("nothing was started"), message
    assert runs_in(air_bin, air_home) == [] and call_dirs(air_home) == []
    # What the message suggests works: only the code goes.
    fn = air.distributed(gpus=1, gpu_type="CPU", remote=False, max_code_mb=2,
                         code_include=["train.py"])(len)
    assert fn.distributed("abc") == [3]


def test_code_options_are_checked_and_named(py_env, air_bin, air_home, tmp_path):  # noqa: F811
    with pytest.raises(ValueError, match=r"code_dir='.*nowhere' is not an existing directory"):
        air.distributed(gpus=1, gpu_type="CPU", code_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"code_include\[0\]='\.\./x' must be relative"):
        air.distributed(gpus=1, gpu_type="CPU", code_include=["../x"])
    with pytest.raises(TypeError, match="code_include must be a list"):
        air.distributed(gpus=1, gpu_type="CPU", code_include="train.py")
    with pytest.raises(ValueError, match="max_code_mb"):
        air.distributed(gpus=1, gpu_type="CPU", max_code_mb=0)
    # A path that is not there is air's finding, phrased with the option.
    (py_env / "train.py").write_text("x = 1\n")
    fn = air.distributed(gpus=1, gpu_type="CPU", remote=False, code_include=["missing.py"])(len)
    with pytest.raises(air.CallerError) as excinfo:
        fn.distributed("abc")
    message = str(excinfo.value)
    assert message.startswith("@distributed: code_include[0]='missing.py': "), message
    assert "does not exist" in message and "include_paths" not in message, message
    assert runs_in(air_bin, air_home) == []
