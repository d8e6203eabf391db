// /proc readers for process trees and groups.
#include "agent/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>

namespace air::agent {

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  //  stime cutime cstime priority nice num_threads itrealvalue starttime ..."; comm may hold
  // spaces and parentheses, so parse from the last ')'.
  std::string text(buf, static_cast<size_t>(n));
  size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  const char* p = text.c_str() + close + 2;
  ProcStat stat;
  stat.pid = pid;
  stat.state = *p;
  p += 1;
  char* end = nullptr;
  auto next = [&]() -> long long {
    long long v = std::strtoll(p, &end, 10);
    p = end;
    return v;
  };
  stat.ppid = static_cast<pid_t>(next());
  stat.pgid = static_cast<pid_t>(next());
  stat.sid = static_cast<pid_t>(next());
  // Skip tty_nr .. itrealvalue (fields 7..21), then starttime (22).
  for (int field = 7; field <= 21; ++field) next();
  stat.start_ticks = static_cast<uint64_t>(std::strtoull(p, &end, 10));
  return stat;
}

std::vector<ProcStat> ListProcesses() {
  std::vector<ProcStat> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (struct dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    if (auto stat = ReadProcStat(static_cast<pid_t>(pid))) out.push_back(*stat);
  }
  ::closedir(dir);
  return out;
}

std::vector<pid_t> DescendantsOf(pid_t root) {
  std::vector<pid_t> out;
  for (const ProcStat& p : DescendantStatsOf(root)) out.push_back(p.pid);
  return out;
}

std::vector<ProcStat> DescendantStatsOf(pid_t root) {
  std::vector<ProcStat> all = ListProcesses();
  std::multimap<pid_t, const ProcStat*> children;
  for (const auto& p : all) children.emplace(p.ppid, &p);
  std::vector<ProcStat> out;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      const ProcStat* child = it->second;
      if (child->pid == root) continue;
      frontier.push_back(child->pid);
      if (child->state != 'Z') out.push_back(*child);
    }
  }
  return out;
}

std::vector<pid_t> MembersOfGroup(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& p : ListProcesses()) {
    if (p.pgid == pgid && p.state != 'Z') out.push_back(p.pid);
  }
  return out;
}

bool IsSameProcessAlive(pid_t pid, std::optional<uint64_t> start_ticks) {
  if (pid <= 0) return false;
  auto stat = ReadProcStat(pid);
  if (!stat || stat->state == 'Z') return false;
  return !start_ticks || stat->start_ticks == *start_ticks;
}

bool SignalSameProcess(pid_t pid, uint64_t start_ticks, int sig) {
  if (pid <= 0) return false;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    if (errno != ENOSYS) return false;  // ESRCH: gone
    if (!IsSameProcessAlive(pid, start_ticks)) return false;
    return ::kill(pid, sig) == 0;
  }
  // The pidfd pins the process that had `pid` when it was opened: if that one is the process
  // that started at `start_ticks`, signalling through the pidfd reaches it and nothing else.
  bool same = IsSameProcessAlive(pid, start_ticks);
  bool sent = same && ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0;
  ::close(pidfd);
  return sent;
}

}  // namespace air::agent
