"""@distributed end to end on air's local backend: a gloo all-reduce of each rank's number on 2
nodes x 2 processes returns [6.0, 6.0, 6.0, 6.0]; every rank has torchrun's environment and
air's (MLFLOW_*, AIR_RUN_ID), the caller's working directory arrives as the code snapshot, each
rank's output is streamed with its rank, and nothing is left behind."""
import json
import os
import subprocess
import sys
import time

from distributed_fixtures import functions
from distributed_fixtures.helpers import air_json, call_dirs, py_env  # noqa: F401
from runtime_jobs.helpers import assert_no_processes_left

import air
from serverless_gpu import distributed

SECRET = "s3cr3t-value-for-the-ranks"
PYTHON_SOURCE = os.path.dirname(os.path.dirname(air.__file__))


def test_all_reduce_on_two_nodes_of_two_processes(py_env, air_bin, air_home, tmp_path,  # noqa: F811
                                                   capfd):
    (py_env / "helper_in_cwd.py").write_text("VALUE = 41\n")
    subprocess.run([air_bin, "secrets", "create-scope", "py_scope"], check=True)
    subprocess.run([air_bin, "secrets", "put-secret", "py_scope", "token"], check=True,
                   input=SECRET.encode())
    probe = tmp_path / "probe"
    probe.mkdir()
    fn = distributed(gpus=4, gpu_type="CPU_2", remote=False,
                     env={"USER_SETTING": "on"},
                     secrets={"PY_TOKEN": "py_scope/token"})(functions.all_reduce_rank)
    result = fn.distributed(str(probe))

    assert result == [6.0, 6.0, 6.0, 6.0]  # 0 + 1 + 2 + 3 on every rank
    assert isinstance(result, air.DistributedResult)
    assert result.run_id == fn.last_run_id
    run = air_json(air_bin, "get", result.run_id)
    assert run["state"] == "SUCCEEDED"
    assert (run["num_nodes"], run["per_node"]) == (2, 2)

    seen = [json.loads((probe / f"rank_{r}.json").read_text()) for r in range(4)]
    port = str(run["attempt_details"][0]["master_port"])
    for rank, s in enumerate(seen):
        node, local = divmod(rank, 2)
        assert s["RANK"] == str(rank) and s["LOCAL_RANK"] == str(local), s
        assert s["GROUP_RANK"] == s["NODE_RANK"] == str(node), s
        assert (s["WORLD_SIZE"], s["LOCAL_WORLD_SIZE"], s["NUM_NODES"]) == ("4", "2", "2"), s
        assert (s["MASTER_ADDR"], s["MASTER_PORT"]) == ("127.0.0.1", port), s
        assert s["TORCHELASTIC_RUN_ID"], s
        assert s["AIR_RUN_ID"] == str(result.run_id), s
        assert s["MLFLOW_RUN_ID"] == run["mlflow_run_id"], s
        assert s["MLFLOW_EXPERIMENT_NAME"] == "all_reduce_rank", s
        assert s["USER_SETTING"] == "on" and s["token_matches"], s
        assert s["helper"] == 41 and s["cwd"] == s["CODE_SOURCE_PATH"], s
        assert s["cwd"] != str(py_env), s  # the node's copy, not the caller's directory

    out, err = capfd.readouterr()
    for rank in range(4):
        assert f"[rank {rank}] rank {rank} of 4 saw sum 6.0" in out, out
        assert f"[rank {rank}] stderr line of rank {rank}" in err, err
    assert f"[air] run {result.run_id}: 4/4 ranks running" in err, err
    assert "[rank 0] the token is [REDACTED]" in out and SECRET not in out + err
    assert call_dirs(air_home) == []  # the call's files are gone
    assert_no_processes_left(air_home, run)


def test_lines_printed_just_before_the_end_all_arrive(py_env, air_bin, air_home,  # noqa: F811
                                                      capfd):
    """The rank prefix copies every line to the node's log before the worker exits (it once
    closed its output first and lost the last lines with EBADF)."""
    fn = distributed(gpus=2, gpu_type="CPU_2", remote=False)(functions.print_lines_then_return)
    assert fn.distributed(3000) == [0, 1]
    out = capfd.readouterr().out
    for rank in (0, 1):
        assert all(f"[rank {rank}] line {i} of rank {rank}" in out for i in range(3000)), rank
    assert "Bad file descriptor" not in out


_PREFIXED_PRINTER = """
import sys
from air._worker import _RankPrefix
prefix = _RankPrefix(int(sys.argv[1]))
for i in range(20000):
    print(f"line {i} of rank {sys.argv[1]} " + "x" * 40)
prefix.close()
"""


def test_ranks_sharing_one_pipe_never_split_each_other_s_lines():
    """Two ranks' prefixers writing to one pipe (a node's output, as torchrun's workers share
    it) with a slow reader: every line arrives whole (64 KiB writes once interleaved mid-line)."""
    read_end, write_end = os.pipe()
    procs = [subprocess.Popen([sys.executable, "-c", _PREFIXED_PRINTER, str(rank)],
                              stdout=write_end, env={**os.environ, "PYTHONPATH": PYTHON_SOURCE})
             for rank in (0, 1)]
    os.close(write_end)
    data = b""
    with os.fdopen(read_end, "rb", buffering=0) as reader:
        while chunk := reader.read(4096):
            data += chunk
            time.sleep(0.0002)  # a reader slower than the writers: the pipe fills
    assert [p.wait() for p in procs] == [0, 0]
    lines = data.decode().splitlines()
    for rank in (0, 1):
        expected = [f"[rank {rank}] line {i} of rank {rank} " + "x" * 40 for i in range(20000)]
        assert [line for line in lines if line.startswith(f"[rank {rank}] ")] == expected, rank
    assert len(lines) == 40000
