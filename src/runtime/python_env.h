// Python environments for `environment.dependencies` (docs/node-environment.md): a venv under
// AIR_HOME/envs/<key>, where key = SHA-256 of the Python interpreter's identity (path and
// version) and the dependency list (or requirements file contents). It is built once — `python3
// -m venv --system-site-packages`, then `pip install` — and reused by every later run with the
// same key; concurrent runs wait on a file lock instead of building twice. An environment whose
// build did not finish (no `.complete` marker) is rebuilt.
//
// Like the seed system's base image, packages the interpreter already has stay importable:
// when the interpreter that creates the venv is itself a venv (e.g. a project venv with torch),
// its site-packages are added through a .pth file.
// Thread safety: stateless; processes coordinate through the lock file.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"

namespace air::runtime {

struct PythonEnvRequest {
  std::vector<std::string> requirements;  // pip requirement strings, in order
  std::string requirements_file;          // or an absolute path to a requirements file
  std::string python = "python3";         // the interpreter that creates the venv
  std::string name_prefix;                // the directory is envs/<name_prefix><key>
  // Polled while waiting for another run's build and while venv/pip run: true stops them
  // (the run is being canceled) and EnsurePythonEnv returns kCancelled.
  std::function<bool()> should_stop;
};

struct PythonEnv {
  std::string dir;      // AIR_HOME/envs/<key>
  std::string bin_dir;  // dir/bin: put first on PATH
  std::string key;
  bool reused = false;  // true when an earlier run had built it
};

// Builds (or reuses) the environment; venv and pip output is appended to `log_path`. On a pip
// failure the error holds pip's last lines and names the log.
Result<PythonEnv> EnsurePythonEnv(const Layout& layout, const PythonEnvRequest& request,
                                  const std::string& log_path, Env* env);

}  // namespace air::runtime
