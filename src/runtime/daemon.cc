// Detached launches of `air supervise` and `air server` (base/subprocess.h does the forking).
#include "runtime/daemon.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

#include "base/subprocess.h"

namespace air::runtime {

Result<std::string> CurrentExecutable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ErrnoStatus("readlink /proc/self/exe", errno);
  return std::string(buf, static_cast<size_t>(n));
}

Status StartDetachedSupervisor(const std::string& air_binary, int64_t run_id,
                               const std::string& air_home, const std::string& log_path) {
  return StartDetachedAir(
      air_binary, {"supervise", std::to_string(run_id), "--air-home", air_home}, log_path,
      fmt::format("the supervisor ({} supervise {}; log {})", air_binary, run_id, log_path));
}

Status StartDetachedAir(const std::string& air_binary, const std::vector<std::string>& args,
                        const std::string& log_path, const std::string& what) {
  SubprocessOptions daemon;
  daemon.argv = {"air"};
  daemon.argv.insert(daemon.argv.end(), args.begin(), args.end());
  daemon.program = air_binary;
  daemon.output_path = log_path;
  Status started = StartDetachedSubprocess(daemon);
  if (!started.ok()) return Status(started.code(), "start " + what + ": " + started.message());
  return Status::Ok();
}

}  // namespace air::runtime
