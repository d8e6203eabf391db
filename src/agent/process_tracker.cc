// Node process tracking: choosing a kind, the tracker file, killing a node from it.
#include "agent/process_tracker.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/cgroup_tracker.h"
#include "agent/proc.h"
#include "base/posix_io.h"

namespace air::agent {
namespace {

using nlohmann::json;

std::string RandomToken() {
  unsigned char bytes[16] = {};
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::string out;
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  // Without getrandom (it cannot fail on Linux >= 3.17) the pid and clock still separate nodes.
  if (got < sizeof(bytes)) out += fmt::format("{}{}", ::getpid(), ::time(nullptr));
  return out;
}

// True when /proc/<pid>/environ holds exactly `entry` ("AIR_NODE_TOKEN=...").
bool EnvironHas(pid_t pid, const std::string& entry) {
  const std::optional<std::string> environ =
      ReadSmallFile("/proc/" + std::to_string(pid) + "/environ");
  if (!environ) return false;
  const std::string& data = *environ;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\0', pos);
    if (end == std::string::npos) end = data.size();
    if (data.compare(pos, end - pos, entry) == 0) return true;
    pos = end + 1;
  }
  return false;
}

// Signals every process carrying the node's token, through a pidfd opened before the token is
// read (so the process checked is the process signalled); returns how many it reached.
int SignalTokenHolders(const std::string& token, int sig) {
  const std::string entry = std::string(kNodeTokenVar) + "=" + token;
  int reached = 0;
  for (const ProcStat& p : ListProcesses()) {
    if (p.pid == ::getpid() || p.state == 'Z') continue;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0));
    if (fd < 0) continue;
    // Same start time: the pidfd and /proc/<pid> are the same process.
    if (IsSameProcessAlive(p.pid, p.start_ticks) && EnvironHas(p.pid, entry) &&
        ::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) == 0) {
      ++reached;
    }
    ::close(fd);
  }
  return reached;
}

bool TokenHoldersLeft(const std::string& token) {
  const std::string entry = std::string(kNodeTokenVar) + "=" + token;
  for (const ProcStat& p : ListProcesses()) {
    if (p.pid != ::getpid() && p.state != 'Z' && EnvironHas(p.pid, entry)) return true;
  }
  return false;
}

// SIGKILL to every token holder until none is left (a double fork in flight is caught by the
// next round). Returns how many were found in the first round.
Result<int> KillTokenHolders(const std::string& token, Env* env, int64_t wait_micros) {
  const int64_t deadline = env->MonotonicMicros() + wait_micros;
  int found = -1;
  while (true) {
    int reached = SignalTokenHolders(token, SIGKILL);
    if (found < 0) found = reached;
    if (reached == 0 && !TokenHoldersLeft(token)) return found;
    if (env->MonotonicMicros() > deadline) {
      return Internal(fmt::format("processes with {}={} survived SIGKILL for {} s", kNodeTokenVar,
                                  token, wait_micros / 1'000'000));
    }
    env->SleepMicros(10'000);
  }
}

TrackerKind ParseKind(const std::string& name, bool* ok) {
  *ok = true;
  if (name == "cgroup2") return TrackerKind::kCgroup2;
  if (name == "freezer") return TrackerKind::kFreezer;
  if (name == "session") return TrackerKind::kSession;
  *ok = false;
  return TrackerKind::kSession;
}

// The node's cgroups under the agent's own cgroup of `kind`; the agent moves into the node's.
Status CreateCgroups(TrackerKind kind, const std::string& name, std::string* node_dir,
                     std::string* parent, int* join_fd) {
  AIR_ASSIGN_OR_RETURN(*parent, cgroup::OwnCgroupDir(kind));
  *node_dir = *parent + "/" + name;
  AIR_RETURN_IF_ERROR(cgroup::CreateCgroup(*node_dir));
  Status st = cgroup::CreateCgroup(*node_dir + "/cmd");
  if (st.ok()) st = cgroup::JoinCgroup(*node_dir, ::getpid());
  if (st.ok()) {
    std::string procs = *node_dir + "/cmd/cgroup.procs";
    *join_fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (*join_fd < 0) st = ErrnoStatus("open " + procs, errno);
  }
  if (!st.ok()) {
    (void)cgroup::JoinCgroup(*parent, ::getpid());
    (void)cgroup::Remove(*node_dir);
  }
  return st;
}

// The node's own cgroup in the v1 memory hierarchy, below the agent's, with the agent in it (the
// command inherits it): "" where there is no v1 memory controller or it cannot be made.
std::string CreateMemoryCgroup(const std::string& name, std::string* parent) {
  auto own = cgroup::OwnV1MemoryDir();
  if (!own.ok()) return "";
  const std::string dir = *own + "/" + name;
  if (!cgroup::CreateCgroup(dir).ok()) return "";
  if (!cgroup::JoinCgroup(dir, ::getpid()).ok()) {
    (void)cgroup::Remove(dir);
    return "";
  }
  *parent = *own;
  return dir;
}

}  // namespace

const char* TrackerKindName(TrackerKind kind) {
  switch (kind) {
    case TrackerKind::kCgroup2:
      return "cgroup2";
    case TrackerKind::kFreezer:
      return "freezer";
    case TrackerKind::kSession:
      return "session";
  }
  return "?";
}

std::string TrackerInfoToJson(const TrackerInfo& info) {
  json j = {{"kind", TrackerKindName(info.kind)},
            {"cgroup", info.cgroup},
            {"token", info.token},
            {"memory_cgroup", info.memory_cgroup},
            {"agent_pid", info.agent_pid},
            {"agent_start_ticks", info.agent_start_ticks}};
  return j.dump(2);
}

Result<TrackerInfo> TrackerInfoFromJson(const std::string& text, const std::string& path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLoss(path + ": not a JSON object");
  try {
    TrackerInfo info;
    bool ok = false;
    info.kind = ParseKind(j.at("kind").get<std::string>(), &ok);
    if (!ok) return DataLoss(path + ": unknown tracker kind " + j.at("kind").dump());
    info.cgroup = j.at("cgroup").get<std::string>();
    info.token = j.at("token").get<std::string>();
    info.memory_cgroup = j.value("memory_cgroup", "");  // absent before it existed
    info.agent_pid = j.at("agent_pid").get<int64_t>();
    info.agent_start_ticks = j.at("agent_start_ticks").get<uint64_t>();
    if (info.token.empty()) return DataLoss(path + ": empty token");
    return info;
  } catch (const json::exception& e) {
    return DataLoss(fmt::format("{}: {}", path, e.what()));
  }
}

Result<TrackerInfo> ReadTrackerInfo(Env* env, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return TrackerInfoFromJson(text, path);
}

Result<int> KillTrackedNode(const TrackerInfo& info, Env* env, int64_t wait_micros) {
  int found = 0;
  // The agent first, so it cannot start anything new while its command is killed.
  if (SignalSameProcess(static_cast<pid_t>(info.agent_pid), info.agent_start_ticks, SIGKILL)) {
    ++found;
  }
  if (info.kind != TrackerKind::kSession) {
    AIR_ASSIGN_OR_RETURN(int in_cgroup, cgroup::KillAll(info.kind, info.cgroup, env, wait_micros));
    found += in_cgroup;
    Status removed = cgroup::Remove(info.cgroup);
    if (!removed.ok()) return removed;
  }
  if (!info.memory_cgroup.empty()) {
    // Its members were the node's processes, killed above (a cgroup kind's).
    AIR_RETURN_IF_ERROR(cgroup::Remove(info.memory_cgroup));
  }
  // Every kind: a process that carries the token but left the cgroup (it cannot, unprivileged,
  // but a root worker can) is still found.
  AIR_ASSIGN_OR_RETURN(int holders, KillTokenHolders(info.token, env, wait_micros));
  return found + holders;
}

Result<std::unique_ptr<NodeTracker>> NodeTracker::Create(const std::string& name, Env* env) {
  TrackerInfo info;
  info.token = RandomToken();
  info.agent_pid = ::getpid();
  if (auto self = ReadProcStat(::getpid())) info.agent_start_ticks = self->start_ticks;
  const std::string dir_name = name + "-" + info.token.substr(0, 8);

  std::vector<TrackerKind> kinds = {TrackerKind::kCgroup2, TrackerKind::kFreezer,
                                    TrackerKind::kSession};
  const bool forced = [&] {
    auto v = env->GetEnv("AIR_PROCESS_TRACKER");
    if (!v || v->empty() || *v == "auto") return false;
    return true;
  }();
  if (forced) {
    std::string wanted = *env->GetEnv("AIR_PROCESS_TRACKER");
    bool ok = false;
    TrackerKind kind = ParseKind(wanted, &ok);
    if (!ok) {
      return InvalidArgument(fmt::format(
          "AIR_PROCESS_TRACKER={}: not a tracker kind (cgroup2, freezer, session or auto)",
          wanted));
    }
    kinds = {kind};
  }
  std::string why;
  for (TrackerKind kind : kinds) {
    info.kind = kind;
    if (kind == TrackerKind::kSession) {
      return std::unique_ptr<NodeTracker>(new NodeTracker(info, "", -1, env));
    }
    std::string node_dir, parent;
    int join_fd = -1;
    Status st = CreateCgroups(kind, dir_name, &node_dir, &parent, &join_fd);
    if (st.ok()) {
      info.cgroup = node_dir;
      std::string memory_parent;
      info.memory_cgroup = CreateMemoryCgroup(dir_name, &memory_parent);
      auto tracker = std::unique_ptr<NodeTracker>(new NodeTracker(info, parent, join_fd, env));
      tracker->memory_parent_ = memory_parent;
      return tracker;
    }
    why = st.message();
  }
  return FailedPrecondition(
      fmt::format("AIR_PROCESS_TRACKER={}: this machine does not offer it: {}",
                  *env->GetEnv("AIR_PROCESS_TRACKER"), why));
}

NodeTracker::~NodeTracker() { Release(); }

int NodeTracker::SignalCommand(int sig) {
  if (info_.kind != TrackerKind::kSession) {
    return cgroup::SignalMembers(info_.cgroup + "/cmd", sig);
  }
  int reached = SignalTokenHolders(info_.token, sig);
  // A descendant that cleared its environment is still ours (we are its child subreaper).
  for (const ProcStat& p : DescendantStatsOf(::getpid())) {
    if (SignalSameProcess(p.pid, p.start_ticks, sig)) ++reached;
  }
  return reached;
}

Status NodeTracker::KillCommand() {
  if (info_.kind != TrackerKind::kSession) {
    AIR_RETURN_IF_ERROR(
        cgroup::KillAll(info_.kind, info_.cgroup + "/cmd", env_, kKillWaitMicros).status());
  }
  const int64_t deadline = env_->MonotonicMicros() + kKillWaitMicros;
  while (true) {
    int reached = SignalCommand(SIGKILL);
    if (reached == 0 && DescendantStatsOf(::getpid()).empty() && !TokenHoldersLeft(info_.token)) {
      return Status::Ok();
    }
    if (env_->MonotonicMicros() > deadline) {
      return Internal(fmt::format("processes of the node survived SIGKILL for {} s",
                                  kKillWaitMicros / 1'000'000));
    }
    env_->SleepMicros(10'000);
  }
}

void NodeTracker::Release() {
  if (released_) return;
  released_ = true;
  (void)KillCommand();
  if (join_fd_ >= 0) ::close(join_fd_);
  join_fd_ = -1;
  if (info_.kind != TrackerKind::kSession) {
    (void)cgroup::JoinCgroup(parent_, ::getpid());
    (void)cgroup::Remove(info_.cgroup);
  }
  if (!info_.memory_cgroup.empty()) {
    (void)cgroup::JoinCgroup(memory_parent_, ::getpid());
    (void)cgroup::Remove(info_.memory_cgroup);
  }
}

}  // namespace air::agent
