// Reading what a node's processes use from cgroup files and /proc.
#include "agent/node_usage.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <tuple>

#include "agent/cgroup_tracker.h"
#include "agent/proc.h"
#include "base/posix_io.h"
#include "base/strings.h"

namespace air::agent {
namespace {

constexpr double kMegabyte = 1e6;  // MLflow's megabytes

uint64_t ToU64(std::string_view text) {
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') break;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

// The value after "key" in a file of "key value" or "key: value" lines.
std::optional<uint64_t> KeyedValue(const std::string& text, std::string_view key) {
  for (const std::string& line : Split(text, '\n')) {
    if (!StartsWith(line, key) || line.size() <= key.size()) continue;
    char sep = line[key.size()];
    if (sep != ' ' && sep != ':') continue;
    return ToU64(Trim(std::string_view(line).substr(key.size() + 1)));
  }
  return std::nullopt;
}

// CPU ticks (utime + stime) and start time of a process, from /proc/<pid>/stat.
struct StatTimes {
  uint64_t cpu_ticks = 0;
  uint64_t start_ticks = 0;
};
std::optional<StatTimes> ReadStatTimes(pid_t pid) {
  auto text = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return std::nullopt;
  size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> f = Split(std::string(Trim(text->substr(close + 1))), ' ');
  // f[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
  if (f.size() < 20) return std::nullopt;
  return StatTimes{ToU64(f[11]) + ToU64(f[12]), ToU64(f[19])};
}

uint64_t ResidentBytes(pid_t pid) {
  auto text = ReadSmallFile("/proc/" + std::to_string(pid) + "/statm");
  if (!text) return 0;
  std::vector<std::string> f = Split(*text, ' ');
  return f.size() < 2 ? 0 : ToU64(f[1]) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// The cgroup v2 counters, where the cgroup's controllers provide them.
std::optional<uint64_t> CgroupCpuMicros(const std::string& dir) {
  auto text = ReadSmallFile(dir + "/cpu.stat");
  return text ? KeyedValue(*text, "usage_usec") : std::nullopt;
}

std::optional<uint64_t> CgroupMemoryBytes(const std::string& dir) {
  auto current = ReadSmallFile(dir + "/memory.current");
  if (!current) return std::nullopt;
  // The working set, as kubectl and docker stats show it: without reclaimable page cache.
  uint64_t bytes = ToU64(Trim(*current));
  uint64_t inactive_file = 0;
  if (auto stat = ReadSmallFile(dir + "/memory.stat")) {
    inactive_file = KeyedValue(*stat, "inactive_file").value_or(0);
  }
  return bytes > inactive_file ? bytes - inactive_file : 0;
}

std::optional<std::pair<uint64_t, uint64_t>> CgroupIoBytes(const std::string& dir) {
  auto text = ReadSmallFile(dir + "/io.stat");
  if (!text) return std::nullopt;
  uint64_t read = 0, written = 0;
  for (const std::string& line : Split(*text, '\n')) {
    for (const std::string& field : Split(line, ' ')) {
      if (StartsWith(field, "rbytes=")) read += ToU64(std::string_view(field).substr(7));
      if (StartsWith(field, "wbytes=")) written += ToU64(std::string_view(field).substr(7));
    }
  }
  return std::make_pair(read, written);
}

int NodeCpus(pid_t agent_pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(agent_pid, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    return CPU_COUNT(&set);
  }
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

}  // namespace

std::pair<uint64_t, uint64_t> NetworkBytes() {
  auto text = ReadSmallFile("/proc/net/dev");
  if (!text) return {0, 0};
  uint64_t rx = 0, tx = 0;
  for (const std::string& line : Split(*text, '\n')) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    if (Trim(std::string_view(line).substr(0, colon)) == "lo") continue;
    std::vector<std::string> f;
    for (const std::string& part : Split(line.substr(colon + 1), ' ')) {
      if (!part.empty()) f.push_back(part);
    }
    // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit bytes.
    if (f.size() < 9) continue;
    rx += ToU64(f[0]);
    tx += ToU64(f[8]);
  }
  return {rx, tx};
}

NodeUsageMeter::NodeUsageMeter(NodeUsageSource source, int64_t now_monotonic_us)
    : source_(std::move(source)), cpus_(NodeCpus(source_.agent_pid)) {
  if (auto meminfo = ReadSmallFile("/proc/meminfo")) {
    machine_memory_bytes_ = KeyedValue(*meminfo, "MemTotal").value_or(0) * 1024;
  }
  std::tie(net_rx0_, net_tx0_) = NetworkBytes();
  baseline_ = ReadTotals(NodeProcesses());
  previous_ = baseline_;
  previous_us_ = now_monotonic_us;
}

std::vector<pid_t> NodeUsageMeter::NodeProcesses() const {
  if (source_.kind != TrackerKind::kSession && !source_.command_cgroup.empty()) {
    return cgroup::Members(source_.command_cgroup);
  }
  return DescendantsOf(source_.agent_pid);
}

NodeUsageMeter::Totals NodeUsageMeter::ReadTotals(const std::vector<pid_t>& processes) {
  const bool cgroup2 = source_.kind == TrackerKind::kCgroup2 && !source_.command_cgroup.empty();
  std::optional<uint64_t> cpu_us, memory;
  std::optional<std::pair<uint64_t, uint64_t>> io;
  if (cgroup2) {
    cpu_us = CgroupCpuMicros(source_.command_cgroup);
    memory = CgroupMemoryBytes(source_.command_cgroup);
    io = CgroupIoBytes(source_.command_cgroup);
  }
  uint64_t resident = 0;
  if (!cpu_us || !memory || !io) {
    // Each process's counters, summed by difference from its previous reading.
    std::map<std::pair<pid_t, uint64_t>, ProcessCounters> now;
    for (pid_t pid : processes) {
      auto times = ReadStatTimes(pid);
      if (!times) continue;  // gone meanwhile
      ProcessCounters counters;
      counters.cpu_ticks = times->cpu_ticks;
      if (auto text = ReadSmallFile("/proc/" + std::to_string(pid) + "/io")) {
        counters.read_bytes = KeyedValue(*text, "read_bytes").value_or(0);
        counters.write_bytes = KeyedValue(*text, "write_bytes").value_or(0);
      }
      const auto key = std::make_pair(pid, times->start_ticks);
      ProcessCounters before;
      if (auto it = seen_.find(key); it != seen_.end()) before = it->second;
      auto grew = [](uint64_t after, uint64_t prior) { return after > prior ? after - prior : 0; };
      summed_.cpu_ticks += grew(counters.cpu_ticks, before.cpu_ticks);
      summed_.read_bytes += grew(counters.read_bytes, before.read_bytes);
      summed_.write_bytes += grew(counters.write_bytes, before.write_bytes);
      resident += ResidentBytes(pid);
      now[key] = counters;
    }
    seen_ = std::move(now);
  }
  static const uint64_t ticks_per_second = static_cast<uint64_t>(::sysconf(_SC_CLK_TCK));
  Totals totals;
  totals.cpu_us = cpu_us ? *cpu_us : summed_.cpu_ticks * 1'000'000 / ticks_per_second;
  totals.memory_bytes = memory ? *memory : resident;
  totals.read_bytes = io ? io->first : summed_.read_bytes;
  totals.write_bytes = io ? io->second : summed_.write_bytes;
  return totals;
}

std::vector<std::pair<std::string, double>> NodeUsageMeter::Read(int64_t now_monotonic_us) {
  const std::vector<pid_t> processes = NodeProcesses();
  if (processes.empty()) return {};
  const Totals totals = ReadTotals(processes);
  std::vector<std::pair<std::string, double>> out;
  const int64_t elapsed_us = now_monotonic_us - previous_us_;
  double cpu = 0;
  if (elapsed_us > 0 && totals.cpu_us > previous_.cpu_us) {
    cpu = 100.0 * static_cast<double>(totals.cpu_us - previous_.cpu_us) /
          (static_cast<double>(elapsed_us) * cpus_);
  }
  out.emplace_back("cpu_utilization_percentage", cpu);
  out.emplace_back("system_memory_usage_megabytes", totals.memory_bytes / kMegabyte);
  if (machine_memory_bytes_ > 0) {
    out.emplace_back("system_memory_usage_percentage",
                     100.0 * static_cast<double>(totals.memory_bytes) / machine_memory_bytes_);
  }
  auto since_start = [](uint64_t now, uint64_t start) {
    return now > start ? static_cast<double>(now - start) / kMegabyte : 0.0;
  };
  out.emplace_back("disk_read_megabytes", since_start(totals.read_bytes, baseline_.read_bytes));
  out.emplace_back("disk_write_megabytes", since_start(totals.write_bytes, baseline_.write_bytes));
  struct statvfs fs;
  if (!source_.workdir.empty() && ::statvfs(source_.workdir.c_str(), &fs) == 0) {
    // As psutil.disk_usage computes them (MLflow's DiskMonitor).
    const double used = static_cast<double>(fs.f_blocks - fs.f_bfree) * fs.f_frsize;
    const double available = static_cast<double>(fs.f_bavail) * fs.f_frsize;
    if (used + available > 0) {
      out.emplace_back("disk_usage_percentage", 100.0 * used / (used + available));
    }
    out.emplace_back("disk_usage_megabytes", used / kMegabyte);
    out.emplace_back("disk_available_megabytes", available / kMegabyte);
  }
  auto [rx, tx] = NetworkBytes();
  out.emplace_back("network_receive_megabytes", since_start(rx, net_rx0_));
  out.emplace_back("network_transmit_megabytes", since_start(tx, net_tx0_));
  previous_ = totals;
  previous_us_ = now_monotonic_us;
  return out;
}

}  // namespace air::agent
