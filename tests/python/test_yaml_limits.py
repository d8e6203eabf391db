"""One YAML loader, one set of limits: every YAML file air reads (`air train --config`,
`air model init --config`, AIR_HOME/config.yaml, a workload) goes through spec::LoadYaml /
ParseYamlDocument, so an alias bomb ("billion laughs": 10^9 nodes once expanded) is a clear
error naming the file, returned at once, never memory exhaustion."""
import resource


def alias_bomb():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def limited():
    # 1 GiB of address space: expanding the bomb would need far more.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def run_limited(air, *args):
    import subprocess
    return subprocess.run([air.binary, *map(str, args)], capture_output=True, text=True,
                          timeout=120, preexec_fn=limited)


def test_an_alias_bomb_is_a_clear_error_in_every_yaml_reader(air, air_home, tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("model_name: m\ndataset_name: d\noutput_dir: o\n" + alias_bomb()
                    + "seed: *a8\n")
    proc = run_limited(air, "train", "--config", bomb)
    assert proc.returncode == 2, proc.stderr
    assert f"{bomb}:" in proc.stderr and "invalid YAML: the document has more than" in proc.stderr

    model = tmp_path / "model.yaml"
    model.write_text("architectures: [LlamaForCausalLM]\n" + alias_bomb() + "extra: *a8\n")
    proc = run_limited(air, "model", "init", "--config", model, "--out", tmp_path / "m")
    assert proc.returncode != 0
    assert f"{model}:" in proc.stderr and "the document has more than" in proc.stderr
    assert not (tmp_path / "m").exists()

    (air_home / "config.yaml").write_text(alias_bomb() + "backend: *a8\n")
    spec = tmp_path / "w.yaml"
    spec.write_text("experiment_name: e\ncompute: {accelerator_type: CPU_1, num_accelerators: 1}\n"
                    "command: 'true'\n")
    proc = run_limited(air, "run", "-f", spec)
    assert proc.returncode != 0
    assert "config.yaml:" in proc.stderr and "the document has more than" in proc.stderr

    spec.write_text(alias_bomb() + "experiment_name: e\ncommand: *a8\n")
    (air_home / "config.yaml").unlink()
    proc = run_limited(air, "run", "--dry-run", "-f", spec)
    assert proc.returncode != 0
    assert "the document has more than" in proc.stderr
