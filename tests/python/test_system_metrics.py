"""System metrics per node (docs/tracking.md "System metrics"), end to end with the real `air`:
a 2-node local run's CPU, memory, disk and network samples read back with the real mlflow client
under MLflow's names (system/node_<rank>/cpu_utilization_percentage, ...), shown by `air get` and
charted per node on the run page in headless Chromium; GPU rows from a fake NVML library built
here (tests/python/system_metrics/fake_nvml.c: NVML's signatures, fixed values) found through
LD_LIBRARY_PATH as the driver's libnvidia-ml.so.1 would be; an NVML that fails to initialise, or
a libnvidia-ml.so.1 that is no library, or a GPU lost while sampling gives no GPU rows and one
`system_metrics` event saying why, and a metric a GPU does not support is left out;
system_metrics_interval_s: 0 samples nothing."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest
from selenium.webdriver.common.by import By

from runtime_jobs.helpers import get, submit, wait_terminal, write_spec
from test_tracking_ui import browser, log_in, wait_ready  # noqa: F401 (a fixture)
from tracking_helpers import http, run_mlflow, server_token

FAKE_NVML = pathlib.Path(__file__).parent / "system_metrics" / "fake_nvml.c"
# Busy for 3 s, then idle: with a 1 s interval every node takes several samples.
BUSY = "timeout 3 bash -c 'while :; do :; done'; sleep 1\n"
CPU_NAMES = ["cpu_utilization_percentage", "system_memory_usage_megabytes",
             "system_memory_usage_percentage", "disk_read_megabytes", "disk_write_megabytes",
             "disk_usage_percentage", "disk_usage_megabytes", "disk_available_megabytes",
             "network_receive_megabytes", "network_transmit_megabytes"]


def server_url(air_home):
    return json.loads((air_home / "tracking" / "server.json").read_text())["url"]


def system_history(air_home, mlflow_run_id):
    """{key: [(step, value, timestamp)]} of every system/ metric of the run, read with the real
    mlflow client."""
    out = run_mlflow(f"""
        import json
        from mlflow import MlflowClient
        c = MlflowClient()
        run = c.get_run({mlflow_run_id!r})
        keys = sorted(k for k in run.data.metrics if k.startswith("system/"))
        print(json.dumps({{k: sorted((m.step, m.value, m.timestamp)
                                    for m in c.get_metric_history({mlflow_run_id!r}, k))
                          for k in keys}}))
        """, server_url(air_home))
    return json.loads(out.stdout.strip().splitlines()[-1])


def events(air_home, run_id, kind):
    status, body, _ = http("GET", f"{server_url(air_home)}/api/air/runs/{run_id}",
                           token=server_token(air_home))
    assert status == 200, body
    return [e for e in json.loads(body)["events"] if e["kind"] == kind]


def build_nvml(directory: pathlib.Path) -> pathlib.Path:
    """The fake NVML, compiled with the system's cc as directory/libnvidia-ml.so.1."""
    cc = shutil.which("cc")
    assert cc, "a C compiler (cc) is required to build the fake NVML"
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run([cc, "-shared", "-fPIC", "-Wall", "-Werror", "-o",
                    str(directory / "libnvidia-ml.so.1"), str(FAKE_NVML)], check=True)
    return directory


def run_with(air, tmp_path, nodes, env=None, **spec):
    run_id = submit(air, write_spec(tmp_path, BUSY, name="sysmetrics", nodes=nodes, **spec),
                    env=dict(os.environ, **(env or {})))
    run = wait_terminal(air, run_id, timeout=120)
    assert run["state"] == "SUCCEEDED", air("logs", run_id).stdout
    return run_id, run


def test_two_node_run_metrics_in_mlflow_air_get_and_the_ui(air, air_home, tmp_path, browser):  # noqa: F811
    run_id, run = run_with(air, tmp_path, 2, system_metrics_interval_s=1)
    history = system_history(air_home, run["mlflow_run_id"])
    for node in (0, 1):
        for name in CPU_NAMES:
            assert f"system/node_{node}/{name}" in history, (name, sorted(history))
        cpu = history[f"system/node_{node}/cpu_utilization_percentage"]
        assert len(cpu) >= 2, cpu
        assert all(0 <= value <= 100 for _, value, _ in cpu), cpu
        assert any(value > 0 for _, value, _ in cpu), cpu  # the busy loop
        memory = history[f"system/node_{node}/system_memory_usage_megabytes"]
        assert any(value > 0 for _, value, _ in memory), memory
        steps = [step for step, _, _ in cpu]
        assert steps == sorted(set(steps)) and steps[0] >= 0, steps  # seconds since the start
    # No NVML on this machine: no GPU rows, and no event about it.
    assert not [k for k in history if "gpu_" in k], sorted(history)
    assert events(air_home, run_id, "system_metrics") == []

    latest = get(air, run_id)["system_metrics"]
    assert [n["node_rank"] for n in latest["nodes"]] == [0, 1], latest
    assert latest["attempt"] == 0
    assert set(CPU_NAMES) <= set(latest["nodes"][0]["metrics"]), latest
    text = air("get", run_id, check=True).stdout
    assert "  system       node 0 at " in text and "\n               node 1 at " in text, text

    browser.get(f"{log_in(air, browser)}runs/{run_id}")
    wait_ready(browser)
    chart = browser.execute_script(
        "const c = Chart.getChart('chart-system-cpu_utilization_percentage');"
        "return c.data.datasets.map((d) => ({label: d.label, n: d.data.length}));")
    assert [d["label"] for d in chart] == ["node 0", "node 1"], chart
    for node, dataset in enumerate(chart):
        assert dataset["n"] == len(history[f"system/node_{node}/cpu_utilization_percentage"])
    # The user's own metric charts do not repeat them.
    assert not browser.find_elements(By.ID, "chart-system/node_0/cpu_utilization_percentage")


def test_gpu_rows_from_nvml(air, air_home, tmp_path):
    lib = build_nvml(tmp_path / "nvml")
    # The node sees NVML's device 1 (by UUID) as its GPU 0 and device 0 as its GPU 1.
    run_id, run = run_with(air, tmp_path, 1, system_metrics_interval_s=1,
                           env={"LD_LIBRARY_PATH": str(lib), "FAKE_NVML_COUNT": "2",
                                "CUDA_VISIBLE_DEVICES": "GPU-fake-1,0"})
    history = system_history(air_home, run["mlflow_run_id"])

    def last(name):
        points = history[f"system/node_0/{name}"]
        assert points, name
        return points[-1][1]

    assert last("gpu_0_utilization_percentage") == 41
    assert last("gpu_0_memory_usage_megabytes") == 2000
    assert last("gpu_0_memory_total_megabytes") == 80000
    assert last("gpu_0_memory_usage_percentage") == 2.5
    assert last("gpu_0_power_usage_watts") == 151
    assert last("gpu_0_power_usage_percentage") == pytest.approx(151 / 700 * 100, abs=1e-3)
    assert last("gpu_0_temperature_celsius") == 51
    assert last("gpu_1_utilization_percentage") == 40
    assert last("gpu_1_power_usage_watts") == 150
    assert not [k for k in history if "gpu_2_" in k], sorted(history)
    assert events(air_home, run_id, "system_metrics") == []
    text = air("get", run_id, check=True).stdout
    assert "node 0 gpu 0: 41% busy, memory 2000/80000 MB, 151.0 W, 51 C" in text, text
    assert "node 0 gpu 1: 40% busy, memory 1000/80000 MB, 150.0 W, 50 C" in text, text


def test_a_metric_a_gpu_does_not_support_is_left_out(air, air_home, tmp_path):
    lib = build_nvml(tmp_path / "nvml")
    run_id, run = run_with(air, tmp_path, 1, system_metrics_interval_s=1,
                           env={"LD_LIBRARY_PATH": str(lib), "FAKE_NVML_COUNT": "1",
                                "FAKE_NVML_TEMPERATURE_ERROR": "3"})  # NVML_ERROR_NOT_SUPPORTED
    history = system_history(air_home, run["mlflow_run_id"])
    assert history["system/node_0/gpu_0_utilization_percentage"][-1][1] == 40
    assert "system/node_0/gpu_0_temperature_celsius" not in history, sorted(history)
    assert events(air_home, run_id, "system_metrics") == []
    assert "node 0 gpu 0: 40% busy, memory 1000/80000 MB, 150.0 W, ?" in \
        air("get", run_id, check=True).stdout


@pytest.mark.parametrize("broken", ["init_error", "not_a_library", "gpu_lost"])
def test_a_failing_nvml_gives_no_gpu_rows_and_one_event(air, air_home, tmp_path, broken):
    env = {"FAKE_NVML_COUNT": "2"}
    if broken == "init_error":
        env["LD_LIBRARY_PATH"] = str(build_nvml(tmp_path / "nvml"))
        env["FAKE_NVML_INIT_ERROR"] = "9"  # NVML_ERROR_DRIVER_NOT_LOADED
        why = "no GPU metrics: nvmlInit_v2: Driver Not Loaded (NVML error 9)"
    elif broken == "gpu_lost":
        env["LD_LIBRARY_PATH"] = str(build_nvml(tmp_path / "nvml"))
        env["FAKE_NVML_POWER_ERROR"] = "15"  # NVML_ERROR_GPU_IS_LOST
        why = ("GPU metrics stopped: nvmlDeviceGetPowerUsage: GPU is lost (NVML error 15) "
               "(gpu 0)")
    else:
        (tmp_path / "nvml").mkdir()
        (tmp_path / "nvml" / "libnvidia-ml.so.1").write_text("not a shared library\n")
        env["LD_LIBRARY_PATH"] = str(tmp_path / "nvml")
        why = "no GPU metrics: cannot load libnvidia-ml.so.1 (GPU metrics): "
    run_id, run = run_with(air, tmp_path, 2, system_metrics_interval_s=1, env=env)
    history = system_history(air_home, run["mlflow_run_id"])
    assert "system/node_1/cpu_utilization_percentage" in history, sorted(history)
    assert not [k for k in history if "gpu_" in k], sorted(history)
    found = events(air_home, run_id, "system_metrics")
    assert len(found) == 1, found  # both nodes saw it; one event
    assert re.match(r"node [01]: " + re.escape(why), found[0]["message"]), found


def test_interval_zero_samples_nothing(air, air_home, tmp_path):
    run_id, run = run_with(air, tmp_path, 1, system_metrics_interval_s=0)
    assert system_history(air_home, run["mlflow_run_id"]) == {}
    assert get(air, run_id)["system_metrics"] is None
    assert not list((air_home / "runs" / str(run_id)).glob("attempt_0/*.metrics"))
