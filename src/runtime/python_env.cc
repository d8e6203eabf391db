// Building and reusing dependency venvs under AIR_HOME/envs.
#include "runtime/python_env.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <functional>

#include "base/strings.h"
#include "runtime/hashing.h"
#include "runtime/subprocess.h"

namespace air::runtime {
namespace {

constexpr const char* kProbe =
    "import sys, sysconfig\n"
    "print(sys.executable)\n"
    "print(sys.version.split()[0])\n"
    "print(int(sys.prefix != sys.base_prefix))\n"
    "print(sysconfig.get_paths()['purelib'])\n"
    "print(sysconfig.get_paths()['platlib'])\n"
    "try:\n"
    "    import pip\n"
    "    print(pip.__version__)\n"
    "except Exception:\n"
    "    print('')\n";

struct Interpreter {
  std::string executable;
  std::string version;
  bool is_venv = false;
  std::string purelib;
  std::string platlib;
  std::string pip_version;  // "" when the interpreter has no pip
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
  if (lines.size() < 6) {
    return Internal("unexpected output from " + python + ": " + ran->output);
  }
  return Interpreter{lines[0], lines[1], lines[2] == "1", lines[3], lines[4], lines[5]};
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

class FileLock {
 public:
  // Waits for the lock, polling `should_stop` (when set) every 100 ms.
  static Result<FileLock> Acquire(const std::string& path,
                                  const std::function<bool()>& should_stop) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus("open lock " + path, errno);
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ::close(fd);
        return ErrnoStatus("lock " + path, err);
      }
      if (should_stop && should_stop()) {
        ::close(fd);
        return Cancelled("stopped waiting for " + path + ": the run is being canceled");
      }
      ::usleep(100'000);
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

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
  key_hash.Update("air-python-env 1\n" + python.executable + "\n" + python.version + "\n");
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
  out.key = key_hash.FinishHex().substr(0, 24);
  out.dir = layout.EnvsDir() + "/" + out.key;
  out.bin_dir = out.dir + "/bin";
  AIR_RETURN_IF_ERROR(env->CreateDirs(layout.EnvsDir()));

  AIR_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(out.dir + ".lock", request.should_stop));
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
      // Keep the creating venv's packages (e.g. torch) importable, as a base image would.
      SubprocessOptions where;
      where.argv = {out.bin_dir + "/python", "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"};
      AIR_ASSIGN_OR_RETURN(SubprocessResult site, RunSubprocess(where));
      std::string site_dir(Trim(site.output));
      if (!site.succeeded() || site_dir.empty()) {
        return Internal("cannot find the new environment's site-packages: " + site.output);
      }
      std::string pth = python.purelib + "\n";
      if (python.platlib != python.purelib) pth += python.platlib + "\n";
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
    return env->WriteFileAtomic(out.dir + "/.complete", python.version + "\n", 0600);
  }();
  if (!built.ok()) {
    (void)env->RemoveAll(out.dir);
    return built;
  }
  return out;
}

}  // namespace air::runtime
