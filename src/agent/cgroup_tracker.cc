// cgroup v2 / v1 freezer directories for node process tracking.
#include "agent/cgroup_tracker.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

#include "base/posix_io.h"
#include "base/strings.h"

namespace air::agent::cgroup {
namespace {

// A whole small file ("" when it cannot be read). Control files are never large.
std::string ReadControl(const std::string& path) { return ReadSmallFile(path).value_or(""); }

Status WriteControl(const std::string& path, std::string_view value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  Status st = WriteFully(fd, value, path);
  ::close(fd);
  return st;
}

// mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".
struct Mount {
  std::string root;
  std::string point;
};

// The mounts of the v2 hierarchy (`v1_controller` empty) or of the v1 hierarchy holding
// `v1_controller` ("freezer", "memory").
std::vector<Mount> FindMounts(std::string_view v1_controller) {
  const std::string wanted_option = fmt::format(",{},", v1_controller);
  std::vector<Mount> out;
  for (const std::string& line : Split(ReadControl("/proc/self/mountinfo"), '\n')) {
    std::vector<std::string> f = Split(line, ' ');
    size_t dash = static_cast<size_t>(std::find(f.begin(), f.end(), "-") - f.begin());
    if (f.size() < 5 || dash + 1 >= f.size()) continue;
    const std::string& fstype = f[dash + 1];
    std::string super = dash + 3 < f.size() ? f[dash + 3] : "";
    bool wanted =
        v1_controller.empty()
            ? fstype == "cgroup2"
            : fstype == "cgroup" && ("," + super + ",").find(wanted_option) != std::string::npos;
    if (wanted) out.push_back(Mount{f[3], f[4]});
  }
  return out;
}

// This process's path in the hierarchy: "0::/a/b" for v2, "N:...freezer...:/a/b" for v1.
std::optional<std::string> OwnPath(std::string_view v1_controller) {
  const std::string wanted = fmt::format(",{},", v1_controller);
  for (const std::string& line : Split(ReadControl("/proc/self/cgroup"), '\n')) {
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    bool match = v1_controller.empty()
                     ? line.substr(0, c1) == "0" && controllers.empty()
                     : ("," + controllers + ",").find(wanted) != std::string::npos;
    if (match) return line.substr(c2 + 1);
  }
  return std::nullopt;
}

void CollectDirs(const std::string& dir, std::vector<std::string>* out) {
  out->push_back(dir);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> subs;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || e->d_type != DT_DIR) continue;
    subs.push_back(dir + "/" + name);
  }
  ::closedir(d);
  for (const auto& sub : subs) CollectDirs(sub, out);
}

bool IsV2(const std::string& dir) { return ::access((dir + "/cgroup.events").c_str(), F_OK) == 0; }

bool Populated(const std::string& dir) {
  if (IsV2(dir)) {
    std::string events = ReadControl(dir + "/cgroup.events");
    if (!events.empty()) return events.find("populated 1") != std::string::npos;
  }
  return !Members(dir).empty();
}

// Freezes `dir` (and everything below it) and waits briefly until it is frozen.
bool Freeze(const std::string& dir, bool freeze, Env* env) {
  const bool v2 = IsV2(dir);
  Status st = v2 ? WriteControl(dir + "/cgroup.freeze", freeze ? "1" : "0")
                 : WriteControl(dir + "/freezer.state", freeze ? "FROZEN" : "THAWED");
  if (!st.ok() || !freeze) return st.ok();
  for (int i = 0; i < 100; ++i) {
    bool frozen = v2 ? ReadControl(dir + "/cgroup.events").find("frozen 1") != std::string::npos
                     : Trim(ReadControl(dir + "/freezer.state")) == "FROZEN";
    if (frozen) return true;
    env->SleepMicros(10'000);
  }
  return false;
}

// This process's directory in the v2 hierarchy (`v1_controller` empty) or in the v1 hierarchy of
// `v1_controller`.
Result<std::string> OwnDir(std::string_view v1_controller) {
  const std::string what =
      v1_controller.empty() ? "cgroup v2" : fmt::format("cgroup v1 {}", v1_controller);
  std::vector<Mount> mounts = FindMounts(v1_controller);
  if (mounts.empty()) return NotFound(fmt::format("no {} hierarchy is mounted", what));
  auto own = OwnPath(v1_controller);
  if (!own) return NotFound(fmt::format("/proc/self/cgroup names no {} cgroup", what));
  for (const Mount& m : mounts) {
    std::string rel = *own;
    if (m.root != "/") {
      if (!StartsWith(rel, m.root)) continue;
      rel = rel.substr(m.root.size());
    }
    if (rel == "/") rel.clear();
    return m.point + rel;
  }
  return NotFound(
      fmt::format("this process's {} cgroup {} is outside every mount of it", what, *own));
}

}  // namespace

Result<std::string> OwnCgroupDir(TrackerKind kind) {
  return OwnDir(kind == TrackerKind::kCgroup2 ? "" : "freezer");
}

Result<std::string> OwnV1MemoryDir() { return OwnDir("memory"); }

Status CreateCgroup(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("create cgroup " + dir, errno);
  }
  if (::access((dir + "/cgroup.procs").c_str(), W_OK) != 0) {
    int err = errno;
    ::rmdir(dir.c_str());
    return ErrnoStatus("cgroup " + dir + "/cgroup.procs is not writable", err);
  }
  return Status::Ok();
}

Status JoinCgroup(const std::string& dir, pid_t pid) {
  return WriteControl(dir + "/cgroup.procs", std::to_string(pid));
}

std::vector<pid_t> Members(const std::string& dir) {
  std::vector<std::string> dirs;
  CollectDirs(dir, &dirs);
  std::vector<pid_t> out;
  for (const auto& d : dirs) {
    for (const std::string& line : Split(ReadControl(d + "/cgroup.procs"), '\n')) {
      long pid = std::strtol(line.c_str(), nullptr, 10);
      if (pid > 0) out.push_back(static_cast<pid_t>(pid));
    }
  }
  return out;
}

int SignalMembers(const std::string& dir, int sig) {
  // Open a pidfd per member, then signal only those still members afterwards: a pid that left
  // (exited, and maybe was reused) between the two reads is not in the second list.
  std::vector<std::pair<pid_t, int>> fds;
  for (pid_t pid : Members(dir)) {
    if (pid == ::getpid()) continue;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd >= 0) fds.emplace_back(pid, fd);
  }
  std::vector<pid_t> now = Members(dir);
  std::set<pid_t> still(now.begin(), now.end());
  int reached = 0;
  for (auto [pid, fd] : fds) {
    if (still.count(pid) != 0 && ::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) == 0) {
      ++reached;
    }
    ::close(fd);
  }
  return reached;
}

Result<int> KillAll(TrackerKind kind, const std::string& dir, Env* env, int64_t wait_micros) {
  if (::access(dir.c_str(), F_OK) != 0) return 0;
  std::vector<pid_t> members = Members(dir);
  std::erase(members, ::getpid());
  const int found = static_cast<int>(members.size());
  const int64_t deadline = env->MonotonicMicros() + wait_micros;
  const bool has_kill =
      kind == TrackerKind::kCgroup2 && ::access((dir + "/cgroup.kill").c_str(), W_OK) == 0;
  while (Populated(dir)) {
    if (has_kill) {
      AIR_RETURN_IF_ERROR(WriteControl(dir + "/cgroup.kill", "1"));
    } else {
      // Frozen members cannot fork or exit, so the pids read are live members when signalled.
      bool frozen = Freeze(dir, true, env);
      if (frozen) {
        for (pid_t pid : Members(dir)) {
          if (pid != ::getpid()) ::kill(pid, SIGKILL);
        }
      } else {
        SignalMembers(dir, SIGKILL);
      }
      Freeze(dir, false, env);
    }
    for (int i = 0; i < 20 && Populated(dir); ++i) env->SleepMicros(5'000);
    if (env->MonotonicMicros() > deadline) {
      std::vector<pid_t> left = Members(dir);
      return Internal(fmt::format("{} process(es) of cgroup {} survived SIGKILL for {} s: {}",
                                  left.size(), dir, wait_micros / 1'000'000, fmt::join(left, " ")));
    }
  }
  return found;
}

Status Remove(const std::string& dir) {
  std::vector<std::string> dirs;
  CollectDirs(dir, &dirs);
  Status first = Status::Ok();
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    if (::rmdir(it->c_str()) != 0 && errno != ENOENT && first.ok()) {
      first = ErrnoStatus("remove cgroup " + *it, errno);
    }
  }
  return first;
}

}  // namespace air::agent::cgroup
