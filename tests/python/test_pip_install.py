"""`pip install ./python` the way a Python user installs a tool: from a copy of the working tree
that has no build/, into a fresh venv; the build backend (scikit-build-core) compiles the `air`
CLI with CMake in a temporary directory and installs it into the venv's bin/ beside the `air`
and `serverless_gpu` modules. Then, with nothing but the venv and the system on PATH (no
build/bin, no AIR_BIN, no PYTHONPATH): `air --version`, and a @distributed call whose ranks
run under that installed air. The source tree is left exactly as it was (no build/, no
egg-info).

pip builds in a temporary directory by default (python/pyproject.toml sets no build-dir). Here
the build directory is named (`-C build-dir=<copy>/build-wheel`, a sibling of build/ as
`scripts/setup.sh` has it) only so that ccache (CCACHE_BASEDIR in CMakeLists.txt, the same build
type and flags) reuses the main build's objects and the test costs a link, not a compile; it is
removed before the source tree is compared."""
import os
import pathlib
import shutil
import site
import subprocess
import sys
import textwrap
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]


def working_tree_copy(dest: pathlib.Path) -> None:
    """The files git would check out plus new ones not ignored: no build/, no venvs."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if not source.is_file():
            continue  # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def tree(root: pathlib.Path) -> list:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_pip_install_builds_and_ships_the_air_binary(tmp_path):
    src = tmp_path / "src"
    working_tree_copy(src)
    assert not (src / "build").exists()
    before = tree(src)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    # The build backend and cloudpickle come from the test venv (no index is used); `air`, the
    # binary and the modules, must come from this install.
    (site_dir,) = venv.glob("lib/python*/site-packages")
    (site_dir / "deps.pth").write_text(site.getsitepackages()[0] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("AIR_BIN", "PYTHONPATH")}
    # The compilers CMake picks by default (as in build/): scikit-build-core would otherwise
    # name Python's (g++), which ccache counts as another compiler.
    env.update(CC="cc", CXX="c++")
    settings = tomllib.loads((src / "python" / "pyproject.toml").read_text())
    assert "build-dir" not in settings["tool"]["scikit-build"]  # pip's default: a temporary one
    build_dir = src / "build-wheel"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--no-build-isolation", "--no-deps", "--no-index", "-C", f"build-dir={build_dir}",
         str(src / "python")],
        capture_output=True, text=True, env=env, timeout=3600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    shutil.rmtree(build_dir)
    assert tree(src) == before  # nothing else written into the source tree

    air = venv / "bin" / "air"
    assert air.is_file() and os.access(air, os.X_OK)
    assert (venv / "share" / "air" / "web" / "index.html").is_file()  # the UI's files
    system_path = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin"))
    clean = dict(env, PATH=str(venv / "bin") + os.pathsep + system_path,
                 AIR_HOME=str(tmp_path / "air_home"), AIR_STOP_GRACE_SECONDS="3")
    version = subprocess.run(["air", "--version"], capture_output=True, text=True, env=clean,
                             timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("air "), version

    call = textwrap.dedent("""
        import shutil, sys
        import air, serverless_gpu
        assert serverless_gpu.distributed is air.distributed
        assert air.__file__.startswith(sys.prefix), air.__file__
        print("air on PATH:", shutil.which("air"))

        def rank_and_binary():
            import os
            return int(os.environ["RANK"]), os.environ["AIR_BIN"]

        print("ranks:", air.distributed(gpus=2, gpu_type="CPU", remote=False, code_dir=None)(
            rank_and_binary).distributed())
        """)
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", call], capture_output=True,
                         text=True, env=clean, cwd=tmp_path, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"air on PATH: {air}" in ran.stdout, ran.stdout
    assert f"ranks: [(0, '{air}'), (1, '{air}')]" in ran.stdout, ran.stdout
