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
    sm = steps["system_metrics"]
    assert sm["ok"] and "cpu_utilization_percentage" in sm["cpu_rows"], sm
    assert sm["gpu_rows"] == {}, sm  # no NVML here: no GPU rows
    assert steps["ranks"]["ok"] and steps["ranks"]["loss_rel_diff"] < 2e-2, steps["ranks"]
    summary = (out / "summary.md").read_text()
    assert "## parity: PASS" in summary and "## resume: PASS" in summary, summary
    # What comes back from the device machine: at most eight files, none of the work.
    assert len(list(out.iterdir())) <= 8, list(out.iterdir())
