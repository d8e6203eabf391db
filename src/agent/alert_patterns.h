// Alert patterns: the one table of known fatal or telling log lines of multi-node training
// (CUDA out of memory, NCCL watchdog timeouts, NCCL and InfiniBand errors, GPU Xid errors,
// rendezvous and TCPStore timeouts, hung collectives, Python MemoryError, the kernel's OOM
// killer), and the matcher a node agent runs on each line of its output (docs/alerts.md).
//
// Every pattern is a literal key (a cheap substring test that rejects almost every line) and a
// regular expression run only on lines holding the key, whose capture groups become named
// fields ("tried", "free", "collective", ...). At most kMaxScanBytes of a line are looked at,
// so the cost per line is bounded whatever the workload prints. The first pattern that matches
// wins, so specific patterns come before general ones.
//
// The rank is taken from the line only: a launcher prefix ("[rank3]:"), torch's "[Rank 3]" /
// "[PG ID 0 PG GUID 0(default_pg) Rank 3]", or a pattern's own "rank" field.
// Thread safety: pure functions over a table compiled once (thread-safe static init).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace air::agent {

struct AlertMatch {
  std::string alert_class;  // "cuda_oom", "nccl_timeout", ...
  std::string title;        // "CUDA out of memory"
  bool fatal = true;        // false: a warning, telling but often harmless ("NCCL WARN ...")
  std::optional<int> rank;  // where the line says it
  // The pattern's captures, by name, in the table's order; empty captures are left out.
  std::vector<std::pair<std::string, std::string>> fields;
  size_t at = 0;  // where the matched text starts in the line
};

// Bytes of a line the matcher looks at (from its start).
inline constexpr size_t kMaxScanBytes = 8192;

// The first pattern of the table that `line` (already redacted) matches, or nullopt.
std::optional<AlertMatch> MatchAlertLine(std::string_view line);

struct AlertClassInfo {
  std::string alert_class;
  std::string title;
};
// Every alert class of the table, once each, in table order.
std::vector<AlertClassInfo> AlertClasses();

}  // namespace air::agent
