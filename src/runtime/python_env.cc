// Building and reusing dependency venvs under AIR_HOME/envs.
#include "runtime/python_env.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <functional>

#include "base/private_dir.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "runtime/hashing.h"

namespace air::runtime {
namespace {

// Prints the interpreter's identity, then every package directory on its sys.path (its own
// site-packages and those its .pth files add: all the layers below it), one per line.
constexpr const char* kProbe =
    "import os, sys, sysconfig\n"
    "print(sys.executable)\n"
    "print(sys.version.split()[0])\n"
    "print(int(sys.prefix != sys.base_prefix))\n"
    "try:\n"
    "    import pip\n"
    "    print(pip.__version__)\n"
    "except Exception:\n"
    "    print('')\n"
    "paths = [sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']]\n"
    "paths += [p for p in sys.path if os.path.basename(p) in ('site-packages', 'dist-packages')]\n"
    "for p in dict.fromkeys(paths):\n"
    "    print(p)\n";

// Writes, into the environment's bin, a launcher for every console script (torchrun, accelerate,
// huggingface-cli, ...) of the layers below that the environment does not have itself: the
// launcher runs this environment's python, so the script sees the run's dependencies. (The
// layer's own script names its own interpreter in its shebang and would not.)
//   - Entry points (console_scripts) get a new launcher from their metadata, whatever the
//     layer's file looks like: a `#!/base/python` line, or the `#!/bin/sh` + `'''exec'
//     "/base/python"` trampoline pip writes when the interpreter path is long or has spaces.
//   - Plain scripts a distribution installs into its bin (setup.py `scripts=`, wheel
//     .data/scripts) whose first line names a python (pip rewrote `#!python` to the layer's
//     interpreter), or that are such a trampoline, are copied with that line (or the
//     trampoline's three lines) replaced by this environment's python.
//   - Other files in a layer's bin (shell scripts, native programs) name no interpreter of
//     their own: they find `python` through PATH, which starts with this environment.
constexpr const char* kLinkConsoleScripts = R"PY(
import importlib.metadata as md, os, re, sys
python = sys.argv[1]
bindir = os.path.dirname(python)
made, seen = [], set()
for dist in md.distributions():
    for ep in dist.entry_points:
        if ep.group != "console_scripts" or ep.name in seen or os.sep in ep.name:
            continue
        seen.add(ep.name)
        path = os.path.join(bindir, ep.name)
        module, _, attr = ep.value.partition(":")
        attr = attr.split("[")[0].strip()
        if os.path.lexists(path) or not attr:
            continue
        head = attr.split(".")[0]
        with open(path, "w") as f:
            f.write(f"#!{python}\n"
                    f"# air: {ep.name} of {dist.metadata['Name']}, run by this environment\n"
                    f"import sys\n"
                    f"from {module.strip()} import {head}\n"
                    f"if __name__ == '__main__':\n"
                    f"    sys.exit({attr}())\n")
        os.chmod(path, 0o755)
        made.append(ep.name)
PYTHON_LINE = re.compile(rb"^#!.*python[0-9.]*([ \t].*)?$")
scripts = []
for dist in md.distributions():
    for entry in dist.files or ():
        source = os.path.abspath(str(dist.locate_file(entry)))
        name, where = os.path.basename(source), os.path.dirname(source)
        if (os.path.basename(where) != "bin" or name in seen or
                os.path.realpath(where) == os.path.realpath(bindir)):
            continue
        seen.add(name)
        path = os.path.join(bindir, name)
        if os.path.lexists(path) or not os.path.isfile(source) or not os.access(source, os.X_OK):
            continue
        with open(source, "rb") as f:
            lines = f.read().split(b"\n")
        if (lines[0] == b"#!/bin/sh" and len(lines) > 2 and lines[1].startswith(b"'''exec'")
                and lines[2].strip() == b"' '''"):
            body = lines[3:]
        elif PYTHON_LINE.match(lines[0]) and not lines[0].startswith(b"#!/bin/sh"):
            body = lines[1:]
        else:
            continue
        with open(path, "wb") as f:
            f.write(b"\n".join([b"#!" + python.encode()] + body))
        os.chmod(path, 0o755)
        scripts.append(name)
print(f"air: {len(made)} console scripts of the layers below now run in this environment:",
      " ".join(sorted(made)))
print(f"air: {len(scripts)} other scripts of the layers below now run in this environment:",
      " ".join(sorted(scripts)))
)PY";

struct Interpreter {
  std::string executable;
  std::string version;
  bool is_venv = false;
  std::string pip_version;                // "" when the interpreter has no pip
  std::vector<std::string> package_dirs;  // its site-packages and the layers below, in order
};

// pip >= 22.3 can install into another interpreter's environment (--python), so the venv can be
// created without its own pip (seconds faster than ensurepip).
bool PipCanTargetOtherPython(const std::string& version) {
  std::vector<std::string> parts = Split(version, '.');
  if (parts.size() < 2) return false;
  int major = std::atoi(parts[0].c_str());
  int minor = std::atoi(parts[1].c_str());
  return major > 22 || (major == 22 && minor >= 3);
}

Result<Interpreter> ProbeInterpreter(const std::string& python) {
  SubprocessOptions probe;
  probe.argv = {python, "-c", kProbe};
  auto ran = RunSubprocess(probe);
  if (!ran.ok() || !ran->succeeded()) {
    std::string why = ran.ok() ? ran->Describe() + ": " + ran->output : ran.status().message();
    return FailedPrecondition(
        fmt::format("environment.dependencies needs a Python interpreter ('{}' on PATH) to "
                    "build the environment: {}",
                    python, why));
  }
  std::vector<std::string> lines = Split(ran->output, '\n');
  if (lines.size() < 5) {
    return Internal("unexpected output from " + python + ": " + ran->output);
  }
  Interpreter out{lines[0], lines[1], lines[2] == "1", lines[3], {}};
  for (size_t i = 4; i < lines.size(); ++i) {
    if (!Trim(lines[i]).empty()) out.package_dirs.push_back(lines[i]);
  }
  return out;
}

// The last `count` lines of a text file ("" when unreadable).
std::string LastLines(Env* env, const std::string& path, size_t count) {
  auto text = env->ReadFile(path);
  if (!text.ok()) return "";
  std::vector<std::string> lines = Split(*text, '\n');
  while (!lines.empty() && Trim(lines.back()).empty()) lines.pop_back();
  size_t start = lines.size() > count ? lines.size() - count : 0;
  std::vector<std::string> tail(lines.begin() + static_cast<long>(start), lines.end());
  return Join(tail, "\n");
}

Status Step(const std::vector<std::string>& argv, const std::string& log_path, Env* env,
            const std::string& what, const std::function<bool()>& should_stop) {
  (void)env->AppendToFile(log_path, "air: " + Join(argv, " ") + "\n");
  SubprocessOptions options;
  options.argv = argv;
  options.output_path = log_path;
  options.should_stop = should_stop;
  AIR_ASSIGN_OR_RETURN(SubprocessResult ran, RunSubprocess(options));
  if (ran.succeeded()) return Status::Ok();
  return FailedPrecondition(fmt::format("{} failed ({}); the full output is in {}:\n{}", what,
                                        ran.Describe(), log_path, LastLines(env, log_path, 15)));
}

}  // namespace

Result<PythonEnv> EnsurePythonEnv(const Layout& layout, const PythonEnvRequest& request,
                                  const std::string& log_path, Env* env) {
  AIR_ASSIGN_OR_RETURN(Interpreter python, ProbeInterpreter(request.python));
  Sha256 key_hash;
  // 2: environments also get the lower layers' plain scripts (kLinkConsoleScripts).
  key_hash.Update("air-python-env 2\n" + python.executable + "\n" + python.version + "\n");
  if (!request.requirements_file.empty()) {
    auto text = env->ReadFile(request.requirements_file);
    if (!text.ok()) {
      return text.status().WithContext("environment.dependencies requirements file");
    }
    key_hash.Update("file\n" + *text);
  } else {
    for (const auto& req : request.requirements) key_hash.Update("req\n" + req + "\n");
  }
  PythonEnv out;
  out.key = request.name_prefix + key_hash.FinishHex().substr(0, 24);
  out.dir = layout.EnvsDir() + "/" + out.key;
  out.bin_dir = out.dir + "/bin";
  AIR_RETURN_IF_ERROR(MakePrivateDir(layout.EnvsDir(), env));

  AIR_ASSIGN_OR_RETURN(FileLock lock, env->LockFile(out.dir + ".lock", FileLock::Mode::kExclusive,
                                                    request.should_stop));
  if (env->FileExists(out.dir + "/.complete")) {
    out.reused = true;
    (void)env->AppendToFile(log_path, "air: reusing Python environment " + out.dir + "\n");
    return out;
  }
  AIR_RETURN_IF_ERROR(env->RemoveAll(out.dir));  // an interrupted earlier build
  (void)env->AppendToFile(log_path, fmt::format("air: building Python environment {} (Python {})\n",
                                                out.dir, python.version));
  Status built = [&]() -> Status {
    const bool outer_pip = PipCanTargetOtherPython(python.pip_version);
    std::vector<std::string> venv = {python.executable, "-m", "venv", "--system-site-packages"};
    if (outer_pip) venv.push_back("--without-pip");
    venv.push_back(out.dir);
    AIR_RETURN_IF_ERROR(
        Step(venv, log_path, env, "creating the virtual environment", request.should_stop));
    if (python.is_venv) {
      // Keep the packages of the creating venv and of every layer below it (e.g. torch)
      // importable, as a base image would: a .pth line per package directory, in order.
      SubprocessOptions where;
      where.argv = {out.bin_dir + "/python", "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"};
      AIR_ASSIGN_OR_RETURN(SubprocessResult site, RunSubprocess(where));
      std::string site_dir(Trim(site.output));
      if (!site.succeeded() || site_dir.empty()) {
        return Internal("cannot find the new environment's site-packages: " + site.output);
      }
      std::string pth;
      for (const auto& dir : python.package_dirs) pth += dir + "\n";
      AIR_RETURN_IF_ERROR(env->WriteFileAtomic(site_dir + "/_air_base_packages.pth", pth, 0600));
    }
    std::vector<std::string> pip = {out.bin_dir + "/python", "-m", "pip"};
    if (outer_pip) pip = {python.executable, "-m", "pip", "--python", out.bin_dir + "/python"};
    for (const char* arg : {"install", "--disable-pip-version-check", "--no-input"}) {
      pip.push_back(arg);
    }
    if (!request.requirements_file.empty()) {
      pip.push_back("-r");
      pip.push_back(request.requirements_file);
    } else {
      pip.insert(pip.end(), request.requirements.begin(), request.requirements.end());
    }
    AIR_RETURN_IF_ERROR(Step(pip, log_path, env, "pip install", request.should_stop));
    AIR_RETURN_IF_ERROR(
        Step({out.bin_dir + "/python", "-c", kLinkConsoleScripts, out.bin_dir + "/python"},
             log_path, env, "linking console scripts", request.should_stop));
    return env->WriteFileAtomic(out.dir + "/.complete", python.version + "\n", 0600);
  }();
  if (!built.ok()) {
    (void)env->RemoveAll(out.dir);
    return built;
  }
  return out;
}

}  // namespace air::runtime
