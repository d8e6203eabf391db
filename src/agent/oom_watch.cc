// Reading a memory cgroup's OOM-kill counter and recording its rises as alerts.
#include "agent/oom_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "agent/cgroup_tracker.h"
#include "base/strings.h"

namespace air::agent {
namespace {

// A limit at or past this is "no limit" (v1 writes 2^63 rounded down to a page; v2 "max").
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

// The value of `key` in "key value" lines (memory.events, memory.oom_control, memory.stat).
std::optional<uint64_t> KeyedValue(std::string_view text, std::string_view key) {
  for (const std::string& line : Split(text, '\n')) {
    std::vector<std::string> f = Split(Trim(line), ' ');
    if (f.size() == 2 && f[0] == key) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(f[1].c_str(), &end, 10);
      if (end != f[1].c_str() && *end == '\0') return v;
    }
  }
  return std::nullopt;
}

// A file holding one number ("max" and unreadable: nullopt).
std::optional<uint64_t> NumberFile(const std::string& path, Env* env) {
  auto text = env->ReadFile(path);
  if (!text.ok()) return std::nullopt;
  std::string value(Trim(*text));
  char* end = nullptr;
  unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0') return std::nullopt;
  return v;
}

std::string Parent(const std::string& dir) {
  size_t slash = dir.rfind('/');
  return slash == std::string::npos || slash == 0 ? "" : dir.substr(0, slash);
}

// v2: the smallest memory.max of `dir` and its ancestors (a cgroup's limit bounds everything
// below it). The walk ends where a directory has no memory.max (the hierarchy's root).
std::optional<uint64_t> V2Limit(std::string dir, Env* env) {
  std::optional<uint64_t> limit;
  while (!dir.empty() && env->FileExists(dir + "/memory.max")) {
    if (auto v = NumberFile(dir + "/memory.max", env); v && (!limit || *v < *limit)) limit = v;
    dir = Parent(dir);
  }
  return limit;
}

std::string CounterFile(const MemoryCgroup& cgroup) {
  return cgroup.dir + (cgroup.v2 ? "/memory.events" : "/memory.oom_control");
}

std::string BytesText(std::optional<uint64_t> bytes) {
  if (!bytes || *bytes >= kNoLimit) return "max";
  return HumanBytes(*bytes);
}

}  // namespace

std::optional<int64_t> ParseOomKill(std::string_view text) {
  auto v = KeyedValue(text, "oom_kill");
  if (!v) return std::nullopt;
  return static_cast<int64_t>(*v);
}

Result<OomCounters> ReadOomCounters(const MemoryCgroup& cgroup, Env* env) {
  const std::string path = CounterFile(cgroup);
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  std::optional<int64_t> kills = ParseOomKill(text);
  if (!kills) return NotFound(path + " has no oom_kill line (a kernel before 4.13)");
  OomCounters counters;
  counters.oom_kill = *kills;
  if (cgroup.v2) {
    counters.limit = V2Limit(cgroup.dir, env);
    counters.peak = NumberFile(cgroup.dir + "/memory.peak", env);  // Linux 5.19+
  } else {
    // v1 keeps the ancestors' smallest limit for us.
    if (auto stat = env->ReadFile(cgroup.dir + "/memory.stat"); stat.ok()) {
      counters.limit = KeyedValue(*stat, "hierarchical_memory_limit");
    }
    counters.peak = NumberFile(cgroup.dir + "/memory.max_usage_in_bytes", env);
  }
  return counters;
}

std::optional<MemoryCgroup> NodeMemoryCgroup(const TrackerInfo& tracker, Env* env) {
  // v2: from the command's cgroup up, while the directories are cgroups.
  std::string dir;
  if (tracker.kind == TrackerKind::kCgroup2) {
    dir = tracker.cgroup + "/cmd";
  } else if (auto own = cgroup::OwnCgroupDir(TrackerKind::kCgroup2); own.ok()) {
    dir = *own;
  }
  while (!dir.empty() && env->FileExists(dir + "/cgroup.controllers")) {
    if (env->FileExists(dir + "/memory.events")) {
      const bool own = tracker.kind == TrackerKind::kCgroup2 &&
                       (dir == tracker.cgroup || StartsWith(dir, tracker.cgroup + "/"));
      return MemoryCgroup{dir, true, own};
    }
    dir = Parent(dir);
  }
  if (!tracker.memory_cgroup.empty()) return MemoryCgroup{tracker.memory_cgroup, false, true};
  return std::nullopt;
}

std::unique_ptr<OomWatch> OomWatch::ForNode(const NodeLaunch& launch, const TrackerInfo& tracker,
                                            Env* env) {
  std::optional<MemoryCgroup> cgroup = NodeMemoryCgroup(tracker, env);
  if (!cgroup || !ReadOomCounters(*cgroup, env).ok()) return nullptr;
  std::optional<int> rank;
  for (const auto& [name, value] : launch.env) {
    if (name == "LOCAL_WORLD_SIZE" && value == "1") rank = launch.node_rank;
  }
  return std::make_unique<OomWatch>(std::move(*cgroup), rank, env);
}

OomWatch::OomWatch(MemoryCgroup cgroup, std::optional<int> rank, Env* env)
    : cgroup_(std::move(cgroup)), rank_(rank), env_(env) {
  if (auto counters = ReadOomCounters(cgroup_, env_); counters.ok()) seen_ = counters->oom_kill;
}

void OomWatch::Check(AlertScanner* alerts) {
  auto counters = ReadOomCounters(cgroup_, env_);
  if (!counters.ok() || counters->oom_kill <= seen_) return;
  const int64_t was = seen_;
  seen_ = counters->oom_kill;
  AlertRecord record;
  record.alert_class = "oom_killer";
  record.title = "killed by the kernel's OOM killer";
  record.rank = rank_;
  record.time_us = env_->NowMicros();
  record.stream = "cgroup";
  record.fields = {{"count", std::to_string(counters->oom_kill - was)},
                   {"memory_max", BytesText(counters->limit)},
                   {"memory_peak", counters->peak ? HumanBytes(*counters->peak) : "unknown"},
                   {"cgroup", cgroup_.dir}};
  record.line =
      fmt::format("{}: oom_kill {} (was {}); memory limit {}, peak {}{}", CounterFile(cgroup_),
                  counters->oom_kill, was, BytesText(counters->limit),
                  counters->peak ? HumanBytes(*counters->peak) : "unknown",
                  cgroup_.own ? "" : " (a cgroup above the node's: it holds other processes too)");
  alerts->Record(std::move(record));
}

}  // namespace air::agent
