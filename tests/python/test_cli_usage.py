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


def test_dash_dash_version_prints_the_version_like_air_version(air):
    proc = air("--version", check=True)
    assert proc.stdout == air("version", check=True).stdout
    assert proc.stdout.startswith("air ") and proc.stderr == ""


def test_unknown_option_is_named_instead_of_a_missing_required_one(air):
    # CLI11 alone reports "--file is required" here: the real mistake is the unknown option.
    proc = air("run", "--bogus")
    assert proc.returncode == 2
    assert proc.stderr == ("error: unknown option '--bogus' for 'air run'; its options: --file, "
                           "--dry-run, --watch, --node, --backend, --override\n"
                           "Run 'air run --help' for its usage.\n")


def test_misspelled_option_gets_a_suggestion(air, tmp_path):
    proc = air("run", "-f", tmp_path / "w.yaml", "--drye-run")
    assert proc.returncode == 2
    assert "unknown option '--drye-run' for 'air run' (did you mean '--dry-run'?)" in proc.stderr
    proc = air("logs", "1", "--retry", "-1", "--lnes", "5")  # -1 is a value, not an option
    assert "unknown option '--lnes' for 'air logs' (did you mean '--lines'?)" in proc.stderr


def test_usage_errors_point_at_the_commands_own_help(air):
    proc = air("run")
    assert proc.returncode == 2
    assert proc.stderr == "error: --file is required\nRun 'air run --help' for its usage.\n"
    proc = air("secrets", "put-secret", "--bogus")
    assert "unknown option '--bogus' for 'air secrets put-secret'" in proc.stderr
    assert "Run 'air secrets put-secret --help' for its usage." in proc.stderr


def test_unknown_and_missing_subcommands_of_a_group(air):
    proc = air("secrets", "put-secrt")
    assert proc.returncode == 2
    assert ("unknown command 'put-secrt' for 'air secrets' (did you mean 'put-secret'?); "
            "commands: create-scope, put-secret,") in proc.stderr
    proc = air("secrets")
    assert proc.returncode == 2
    assert "'air secrets' needs a command: create-scope, put-secret," in proc.stderr


def test_unknown_option_in_json_is_an_envelope_with_the_help_command(air):
    code, env = air.json("run", "--bogus")
    assert code == 2
    assert env["error"]["code"] == "invalid_argument"
    assert env["error"]["message"].startswith("unknown option '--bogus' for 'air run'")
    assert env["error"]["help"] == "air run --help"


def test_workload_file_without_f_gets_the_right_form(air):
    # `air run train.yaml` (kubectl/torchrun habit) reads "--file is required" in CLI11 alone.
    proc = air("run", "train.yaml", "--dry-run")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: unexpected argument 'train.yaml' for 'air run'; give "
                                  "the workload file with -f: air run -f train.yaml\n")
    proc = air("version", "extra")
    assert proc.stderr.startswith("error: unexpected argument 'extra' for 'air version'\n")
