"""The @distributed API without a run: `serverless_gpu.distributed is air.distributed` (from the
source tree; the installed wheel is test_pip_install.py's), the plain call runs the function
here, and bad input — gpus, gpu_type, options, no air binary — is a clear error before anything
runs (no run, no call directory)."""
import os

import pytest
from distributed_fixtures.helpers import call_dirs, py_env, runs_in  # noqa: F401

import air


def test_serverless_gpu_and_air_give_the_same_decorator():
    import serverless_gpu
    from serverless_gpu import distributed
    assert distributed is air.distributed
    assert serverless_gpu.distributed is air.distributed


def test_plain_call_runs_the_function_here_once():
    @air.distributed(gpus=8, gpu_type="H100", remote=True)
    def add(a, b=1):
        """doc"""
        return a + b, os.getpid()

    assert add(2, b=3) == (5, os.getpid())
    assert add.__name__ == "add" and add.__doc__ == "doc"
    assert add.shape.accelerator_type == "GPU_8xH100" and add.shape.num_nodes == 1
    assert add.last_run_id is None


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(gpus=0, gpu_type="CPU"), ValueError, "gpus must be a positive integer, got 0"),
    (dict(gpus=-2, gpu_type="H100"), ValueError, "gpus must be a positive integer, got -2"),
    (dict(gpus=2.0, gpu_type="CPU"), TypeError, "gpus must be a positive integer, got 2.0"),
    (dict(gpus="8", gpu_type="H100"), TypeError, "gpus must be a positive integer, got '8'"),
    (dict(gpus=4, gpu_type="H100"), ValueError,
     "gpus=4 does not fit H100 nodes, which have 1 or 8 GPU(s) each; use 1, 8, 16, 24, ..."),
    (dict(gpus=12, gpu_type="H200"), ValueError, "use 8, 16, 24, ..."),
    (dict(gpus=3, gpu_type="CPU_2"), ValueError,
     "gpus=3 is not a multiple of 2, the ranks per node of 'CPU_2'; use 2, 4, 6, ..."),
    (dict(gpus=8, gpu_type="h100"), ValueError,
     "unknown gpu_type 'h100' (did you mean 'H100'?); known: 'A10', 'H100', 'H200', 'CPU', "
     "'CPU_<n>'"),
    (dict(gpus=8, gpu_type="TPUv5"), ValueError, "known: 'A10', 'H100', 'H200', 'CPU'"),
    (dict(gpus=2, gpu_type="CPU_0"), ValueError, "CPU_<n> takes n ranks per node, 1 to 256"),
    (dict(gpus=300, gpu_type="CPU"), ValueError, "use gpu_type='CPU_<n>'"),
    (dict(gpus=2, gpu_type="CPU", remote="yes"), TypeError, "remote must be True or False"),
    (dict(gpus=2, gpu_type="CPU", timeout=0), ValueError, "timeout is seconds, a number > 0"),
    (dict(gpus=2, gpu_type="CPU", max_retries=-1), ValueError, "max_retries must be an integer"),
    (dict(gpus=2, gpu_type="CPU", env={"1BAD": "x"}), ValueError, "env name '1BAD' is not valid"),
    (dict(gpus=2, gpu_type="CPU", env={"N": 3}), TypeError, "env['N'] must be a string"),
    (dict(gpus=2, gpu_type="CPU", secrets={"HF_TOKEN": "no-slash"}), ValueError,
     "must be an air secret reference 'scope/key'"),
])
def test_bad_input_is_an_error_before_anything_runs(py_env, air_bin, air_home, kwargs,  # noqa: F811
                                                     error, text):
    with pytest.raises(error) as excinfo:
        air.distributed(**kwargs)
    assert text in str(excinfo.value), str(excinfo.value)
    assert runs_in(air_bin, air_home) == [] and call_dirs(air_home) == []


def test_no_air_binary_says_how_to_get_one(py_env, air_home, monkeypatch, tmp_path):  # noqa: F811
    fn = air.distributed(gpus=1, gpu_type="CPU")(len)
    monkeypatch.delenv("AIR_BIN")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(air.AirNotFoundError) as excinfo:
        fn.distributed("abc")
    message = str(excinfo.value)
    assert "the air binary was not found" in message and "set AIR_BIN" in message, message
    assert "scripts/setup.sh builds it at build/bin/air" in message
    monkeypatch.setenv("AIR_BIN", str(tmp_path / "nope" / "air"))
    with pytest.raises(air.AirNotFoundError, match=r"AIR_BIN=.*nope/air is not an executable"):
        fn.distributed("abc")
    assert not (air_home / "air.db").exists() and call_dirs(air_home) == []


def test_air_errors_come_back_with_air_s_message(py_env, air_bin, air_home):  # noqa: F811
    fn = air.distributed(gpus=1, gpu_type="CPU", env={"AIR_OWN": "x"})(len)
    with pytest.raises(air.CallerError) as excinfo:  # an AirCommandError and a ValueError
        fn.distributed("abc")
    message = str(excinfo.value)
    # Phrased for the caller: the option, not the generated spec's field or line.
    assert message.startswith("@distributed: env['AIR_OWN']: "), message
    assert "AIR_" in message and "nothing was started" in message, message
    assert "spec.json" not in message and "env_variables" not in message, message
    assert isinstance(excinfo.value, (air.AirCommandError, ValueError))
    assert excinfo.value.code == "invalid_argument"
    assert runs_in(air_bin, air_home) == [] and call_dirs(air_home) == []


def test_a_gpu_shape_this_host_cannot_run_is_air_s_error(py_env, air_bin, air_home):  # noqa: F811
    fn = air.distributed(gpus=8, gpu_type="H100", remote=True)(len)
    with pytest.raises(air.AirCommandError) as excinfo:
        fn.distributed("abc")
    message = str(excinfo.value)
    assert "GPU_8xH100 needs 8 GPU(s)" in message and "gpu_type='CPU'" in message, message
    assert runs_in(air_bin, air_home) == [] and call_dirs(air_home) == []
