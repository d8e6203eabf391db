"""What goes wrong in a @distributed call reaches the caller clearly: rank 1's ValueError is
re-raised as itself naming rank 1 with the remote traceback; an unpicklable argument is refused
before anything runs; an unpicklable return value is named after the run; Ctrl-C (SIGINT to the
caller) cancels the run and leaves no process; a timeout ends the run TIMED_OUT."""
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import pytest
from distributed_fixtures import functions
from distributed_fixtures.helpers import air_json, call_dirs, py_env, runs_in  # noqa: F401
from runtime_jobs.helpers import assert_no_processes_left

import air


def test_rank_1_raising_is_re_raised_naming_rank_1(py_env, air_bin,  # noqa: F811
                                                    air_home):
    fn = air.distributed(gpus=2, gpu_type="CPU", remote=False)(functions.fail_on_rank_1)
    with pytest.raises(ValueError) as excinfo:
        fn.distributed()
    exc = excinfo.value
    assert str(exc) == "boom" and type(exc) is ValueError  # the rank's own exception
    assert exc.__notes__ == [f"[air] raised on rank 1 of 2 (node 0, local rank 1), air run "
                             f"{exc.run_id}; the remote traceback is above"]
    assert exc.rank == 1 and exc.run_id == fn.last_run_id
    remote = exc.__cause__
    assert isinstance(remote, air.RemoteTraceback)
    assert "raised on rank 1 of 2 (node 0, local rank 1)" in remote.text, remote.text
    assert 'raise ValueError("boom")' in remote.text and "fail_on_rank_1" in remote.text
    shown = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    assert "raised on rank 1 of 2" in shown and "ValueError: boom" in shown, shown
    run = air_json(air_bin, "get", exc.run_id)
    assert run["state"] == "FAILED", run
    assert call_dirs(air_home) == []
    assert_no_processes_left(air_home, run)


def test_unpicklable_argument_is_refused_before_anything_runs(py_env,  # noqa: F811
                                                               air_bin, air_home):
    fn = air.distributed(gpus=2, gpu_type="CPU")(functions.fail_on_rank_1)
    with pytest.raises(air.SerializationError) as excinfo:
        fn.distributed(1, lock=threading.Lock())
    message = str(excinfo.value)
    assert "keyword argument 'lock' (a _thread.lock) cannot be serialized" in message, message
    assert "nothing was started" in message
    assert isinstance(excinfo.value, TypeError)
    assert runs_in(air_bin, air_home) == [] and call_dirs(air_home) == []


def test_unpicklable_return_value_is_named(py_env, air_bin, air_home):  # noqa: F811
    fn = air.distributed(gpus=1, gpu_type="CPU")(functions.return_unpicklable)
    with pytest.raises(air.SerializationError) as excinfo:
        fn.distributed()
    message = str(excinfo.value)
    assert "rank 0's return value (builtins.generator) cannot be serialized" in message, message
    assert f"air run {fn.last_run_id}" in message
    assert air_json(air_bin, "get", fn.last_run_id)["state"] == "FAILED"


CALLER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {functions_dir!r})
    from serverless_gpu import distributed
    import functions

    @distributed(gpus=2, gpu_type="CPU", remote=False)
    def sleeper(marker_dir):
        functions.sleep_forever(marker_dir)

    try:
        sleeper.distributed({marker_dir!r})
    except KeyboardInterrupt:
        print("caller got KeyboardInterrupt for run", sleeper.last_run_id, flush=True)
        sys.exit(130)
""")


def test_ctrl_c_cancels_the_run_and_leaves_nothing(py_env, air_bin, air_home,  # noqa: F811
                                                   tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    script = py_env / "caller.py"
    script.write_text(CALLER.format(functions_dir=str(pathlib.Path(functions.__file__).parent),
                                    marker_dir=str(markers)))
    # Ctrl-C's default action even where this test runs with SIGINT ignored (a harness started
    # in the background: Python then installs no KeyboardInterrupt handler).
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=py_env,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while len(list(markers.iterdir())) < 2:
        assert caller.poll() is None, caller.communicate()
        assert time.monotonic() < deadline, "the ranks did not start"
        time.sleep(0.1)
    caller.send_signal(signal.SIGINT)
    out, err = caller.communicate(timeout=120)
    assert caller.returncode == 130, (out, err)
    run_id = int(out.split("caller got KeyboardInterrupt for run")[1])
    assert f"[air] interrupted: canceling run {run_id}" in err, err
    logged = {r["text"] for r in air_json(air_bin, "logs", run_id)["lines"]}
    assert {"[rank 0] ready", "[rank 1] ready"} <= logged, logged
    run = air_json(air_bin, "get", run_id)
    assert run["state"] == "CANCELED", run
    assert_no_processes_left(air_home, run)
    assert call_dirs(air_home) == []


def test_timeout_ends_the_run_timed_out(py_env, air_bin, air_home, tmp_path,  # noqa: F811
                                        monkeypatch):
    monkeypatch.setenv("AIR_TEST_MINUTE_SECONDS", "1")  # timeout=60 s -> 1 minute -> 1 s
    fn = air.distributed(gpus=1, gpu_type="CPU", timeout=60)(functions.sleep_forever)
    with pytest.raises(air.DistributedError, match="ended TIMED_OUT") as excinfo:
        fn.distributed(str(tmp_path))
    assert excinfo.value.run_id == fn.last_run_id
    assert air_json(air_bin, "get", fn.last_run_id)["timeout_minutes"] == 1
