"""The device check (scripts/device_check.py, run on the GPU machine by scripts/device-check.sh)
checking itself on the CPU: its parity, resume, ranks, system metrics and throughput steps run end to end with
the CPU engine on both sides (parity then measures 0; 2 ranks against 1 differ only by their
reductions' order), so a GPU session never finds the script broken. (Its harness step is
ctest's harness, run here by ctest.)"""
import json
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_the_device_check_runs_its_steps_on_the_cpu(tmp_path):
    air_bin = pathlib.Path(os.environ.get("AIR_BIN", REPO / "build/bin/air"))
    out, work = tmp_path / "out", tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, REPO / "scripts/device_check.py", "--bin", air_bin.parent, "--out", out,
         "--work", work, "--device", "cpu", "--steps", "12", "--skip", "harness"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    results = json.loads((out / "device-check.json").read_text())
    steps = results["steps"]
    assert sorted(steps) == ["bench", "parity", "ranks", "resume", "system_metrics"], steps
    for precision in ("fp32", "bf16"):
        p = steps["parity"][precision]
        assert p["ok"] and p["loss_rel_diff"] == 0.0 and p["weights_rel_diff"] == 0.0, p
        assert p["last_loss"] < p["first_loss"], p
    assert steps["resume"]["same_bits"] and steps["resume"]["same_losses"], steps["resume"]
    assert steps["bench"]["tokens_per_s"] > 0, steps["bench"]
    assert steps["bench"]["peak_memory_gib"] > 0, steps["bench"]
    sm = steps["system_metrics"]
    assert sm["ok"] and "cpu_utilization_percentage" in sm["cpu_rows"], sm
    assert sm["gpu_rows"] == {}, sm  # no NVML here: no GPU rows
    assert steps["ranks"]["ok"] and steps["ranks"]["loss_rel_diff"] < 2e-2, steps["ranks"]
    summary = (out / "summary.md").read_text()
    assert "## parity: PASS" in summary and "## resume: PASS" in summary, summary
    # What comes back from the device machine (at most eight files): three, none of the work.
    assert sorted(f.name for f in out.iterdir()) == [
        "device-check.json", "device-check.log", "summary.md"], list(out.iterdir())
    log = (out / "device-check.log").read_text()
    for step in ("parity", "resume", "ranks", "system_metrics", "bench"):
        assert f"[{step}] $ " in log, step


def load_device_check():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import device_check
    finally:
        sys.path.pop(0)
    return device_check


def test_the_bundle_carries_every_library_but_the_runtimes_and_the_gpu_machines_own():
    dc = load_device_check()
    carried = ["/lib/x86_64-linux-gnu/libcurl.so.4", "/lib/x86_64-linux-gnu/libcom_err.so.2",
               "/lib/libgloo.so.0", "/lib/x86_64-linux-gnu/libcrypto.so.3",
               "/lib/x86_64-linux-gnu/libcups.so.2", "/lib/x86_64-linux-gnu/libnghttp2.so.14"]
    left = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6",
            "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libresolv.so.2",
            "/usr/local/cuda/lib64/libcublasLt.so.13", "/usr/local/cuda/lib64/libcublas.so.13",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/local/cuda/lib64/libcudart.so.13"]
    assert [lib for lib in carried if not dc.carried(lib)] == []
    assert [lib for lib in left if dc.carried(lib)] == []
    # The filter as pack runs it: ldd's paths on stdin, the carried ones out.
    proc = subprocess.run([sys.executable, REPO / "scripts/device_check.py", "--carried"],
                          input="\n".join(carried + left) + "\n", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.split() == carried, proc.stdout + proc.stderr


def test_a_command_past_its_time_is_killed_with_every_process_it_started(tmp_path):
    dc = load_device_check()
    args = type("Args", (), dict(out=str(tmp_path / "out"), work=str(tmp_path / "work"),
                                 bin=str(tmp_path), device="cpu", budget=60.0))()
    check = dc.Check(args)
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    try:
        check.run("hang", ["bash", "-c", script], timeout=2)
        raise AssertionError("a command past its time returned")
    except RuntimeError as e:
        assert "ran past 2 s (killed)" in str(e), e
    grandchild = int(pid_file.read_text())
    for _ in range(100):  # a bound on waiting for the kill to land, not a timing threshold
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        stat = pathlib.Path(f"/proc/{grandchild}/stat")
        if stat.exists() and stat.read_text().split()[2] == "Z":
            break  # killed, not yet reaped by its (dead) parent's reaper
        import time
        time.sleep(0.1)
    else:
        raise AssertionError(f"the command's child {grandchild} outlived the timeout")
    assert "[hang] killed after 2 s" in (tmp_path / "out/device-check.log").read_text()


def test_steps_the_budget_cannot_fit_are_reported_as_skipped(tmp_path):
    air_bin = pathlib.Path(os.environ.get("AIR_BIN", REPO / "build/bin/air"))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, REPO / "scripts/device_check.py", "--bin", air_bin.parent, "--out", out,
         "--work", tmp_path / "work", "--device", "cuda", "--budget", "0", "--skip", "harness"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    steps = json.loads((out / "device-check.json").read_text())["steps"]
    assert sorted(steps) == ["bench", "parity", "ranks", "resume", "system_metrics"], steps
    assert all(r["skipped"] and not r["ok"] for r in steps.values()), steps
    assert "## bench: SKIPPED" in (out / "summary.md").read_text()


def test_the_gpu_harness_filter_selects_the_cuda_cases_of_every_parameterized_suite():
    """On a GPU the harness runs only cuda:0's parameterized cases; the same filter with the
    reference's name in cuda:0's place must select that backend's cases of each suite here (so the
    pattern's shape matches gtest's names), and the tests that are not parameterized."""
    dc = load_device_check()
    core = pathlib.Path(os.environ.get("AIR_BIN", REPO / "build/bin/air")).parent / \
        "air_engine_core_tests"

    def listed(pattern):
        out = subprocess.run([core, "--gtest_list_tests", f"--gtest_filter={pattern}"],
                             capture_output=True, text=True, timeout=120).stdout
        suites, suite = {}, None
        for line in out.splitlines():
            if line and not line.startswith(" ") and line.endswith("."):
                suite = line[:-1]
            elif line.startswith("  ") and suite:
                suites.setdefault(suite, []).append(line.split()[0])
        return suites

    as_reference = listed(dc.harness_filter("cuda").replace("cuda_0", "reference"))
    for suite in ("Backends/OpsHarness", "Backends/BackendContract", "Backends/GradCheck",
                  "BackendRegistry", "OpChecks", "CudaGemmLayout"):
        assert as_reference.get(suite), (suite, sorted(as_reference))
    for suite in ("Backends/OpsHarness", "Backends/BackendContract", "Backends/GradCheck"):
        assert all("/reference" in name for name in as_reference[suite]), as_reference[suite]


def test_on_a_machine_without_a_usable_gpu_the_harness_fails_naming_cudas_reason(tmp_path):
    """The GPU's harness cases skip where CUDA is unusable (gtest counts a skip as a pass): the
    device check must not read that as a green harness. Here no GPU is usable, as on a GPU
    machine whose driver or libraries are wrong."""
    air_bin = pathlib.Path(os.environ.get("AIR_BIN", REPO / "build/bin/air"))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, REPO / "scripts/device_check.py", "--bin", air_bin.parent, "--out", out,
         "--work", tmp_path / "work", "--device", "cuda",
         "--skip", "parity,resume,ranks,system_metrics,bench"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    harness = json.loads((out / "device-check.json").read_text())["steps"]["harness"]
    assert not harness["ok"] and harness["worst"] == {}, harness
    assert any("cuda:0 never ran" in line for line in harness["failed"]), harness
    # CUDA's own reason reaches the summary (here: no driver, or no build with CUDA).
    assert any("cuda" in line for line in harness["backends"] + harness["notes"]), harness
    assert "## harness: FAIL" in (out / "summary.md").read_text()
