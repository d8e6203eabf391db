"""The invalid-workload corpus (tests/data/spec) through the real CLI: each file fails with
exactly its expected `FILE:LINE:COL: field: message` lines, exit code 2, nothing created."""
import json
import os
import pathlib
import subprocess

import pytest

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "spec"
CASES = sorted(DATA.glob("*.yaml"))


def expectations(path):
    sidecar = path.with_name(path.name + ".expect")
    if sidecar.exists():
        return [line.strip() for line in sidecar.read_text().splitlines() if line.strip()]
    text = path.read_bytes().decode("utf-8", errors="replace")
    return [line[len("# expect: "):] for line in text.splitlines()
            if line.startswith("# expect: ")]


def test_corpus_has_at_least_thirty_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_invalid_workload(air, tmp_path, case):
    expected = expectations(case)
    assert expected, f"{case} has no expectations"
    home = tmp_path / "air_home_never_created"
    proc = air("run", "-f", case, "--dry-run", env={**os.environ, "AIR_HOME": str(home)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    prefix = f"{case}:"
    lines = [l[len(prefix):] for l in proc.stderr.splitlines() if l.startswith(prefix)]
    assert len(lines) == len(expected), proc.stderr
    for want, got in zip(expected, lines):
        assert got.startswith(want), f"\nwant: {want}\ngot:  {got}"
    assert proc.stderr.splitlines()[-1].startswith("error: ")
    assert "nothing was started" in proc.stderr
    assert proc.stdout == ""
    assert not home.exists()


@pytest.mark.parametrize("name", ["many_errors_sorted.yaml", "not_utf8.yaml", "empty.yaml",
                                  "syntax_unclosed_flow.yaml"])
def test_invalid_workload_json(air, air_home, name):
    case = DATA / name
    rc, env = air.json("run", "-f", case, "--dry-run")
    assert rc == 2
    error = env["error"]
    assert error["code"] == "invalid_argument"
    assert error["message"].startswith(f"{case} has ")
    got = [f"{e['line']}:{e['column']}: " + (f"{e['field']}: " if e["field"] else "") +
           e["message"] for e in error["errors"]]
    want = expectations(case)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert g.startswith(w)
    assert all(e["file"] == str(case) for e in error["errors"])
    assert list(air_home.iterdir()) == []


def test_missing_file_is_invalid_input(air, air_home, tmp_path):
    proc = air("run", "-f", tmp_path / "nope.yaml", "--dry-run")
    assert proc.returncode == 2
    assert f"{tmp_path / 'nope.yaml'}" in proc.stderr
    assert "No such file" in proc.stderr


def test_json_errors_with_non_ascii_and_non_utf8_text_do_not_crash(air, air_home, tmp_path):
    # 'é' in a message used to be cut to its first byte, and bytes that are not UTF-8 (from a
    # file name or an --override) made the JSON writer throw: the process aborted (134).
    case = DATA / "experiment_name_non_ascii.yaml"
    rc, env = air.json("run", "-f", case, "--dry-run")
    assert rc == 2
    assert env["error"]["errors"][0]["message"].startswith("'café-sft' contains 'é';")
    seed = DATA.parents[2] / "examples" / "multinode_llm_sft" / "train.yaml"
    args = [air.binary, "-o", "json", "run", "-f", str(seed).encode(), "--dry-run",
            "--override", b"env_variables.X=caf\xe9"]
    proc = subprocess.run(args, capture_output=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["errors"][0]["message"].startswith("invalid UTF-8 at byte 19 (0xe9)")
    assert error["errors"][0]["origin"] == "--override env_variables.X=caf\ufffd"
    proc = subprocess.run([air.binary, "-o", "json", "run", "-f",
                           bytes(tmp_path) + b"/\xff.yaml", "--dry-run"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert json.loads(proc.stdout)["error"]["message"].endswith(
        "/\ufffd.yaml: No such file or directory")
    assert list(air_home.iterdir()) == []
