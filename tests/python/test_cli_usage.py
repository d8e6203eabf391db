"""Usage errors of the air executable: unknown commands get a suggestion, exit code 2, and the
JSON envelope when -o json is asked for."""


def test_unknown_command_suggests_the_closest(air):
    proc = air("rn")
    assert proc.returncode == 2
    assert "unknown command 'rn' (did you mean 'run'?)" in proc.stderr
    assert "commands: version, run, get, list, logs, cancel, secrets" in proc.stderr


def test_missing_command_lists_commands(air):
    proc = air()
    assert proc.returncode == 2
    assert "a command is required; commands:" in proc.stderr


def test_usage_error_in_json_is_an_envelope(air):
    code, env = air.json("lst")
    assert code == 2
    assert env["v"] == 1 and "ts" in env
    assert env["error"]["code"] == "invalid_argument"
    assert "did you mean 'list'?" in env["error"]["message"]


def test_version_envelope_starts_with_v(air):
    proc = air("-o", "json", "version", check=True)
    assert proc.stdout.startswith('{"v":1,"ts":"')
