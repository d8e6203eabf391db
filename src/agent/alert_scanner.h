// AlertScanner: the node agent's side of alerts (docs/alerts.md). Each output line of the node,
// after secret redaction (the agent's OutputFilter), is matched against the alert table
// (agent/alert_patterns.h); a match is appended as one JSON line to the node's alerts file,
// attempt_K/node_N.alerts, which the supervisor ingests into the run's events (kind "alert",
// runtime/alerts.h). A file, like the node's other reports (agent/node_launch.h), so the agent
// works the same under every launcher.
//
// Bounded: at most kMaxAlertsPerClass records per class and kMaxAlertsPerNode in all per node and
// attempt (a flood of identical lines records its first few), each line cut to
// kMaxAlertLineBytes around the match.
// Thread safety: one scanner per node agent, used by its one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/status.h"

namespace air::agent {

inline constexpr int kMaxAlertsPerClass = 5;
inline constexpr int kMaxAlertsPerNode = 40;
inline constexpr size_t kMaxAlertLineBytes = 1024;

// One line of an alerts file.
struct AlertRecord {
  std::string alert_class;  // "cuda_oom"
  std::string title;        // "CUDA out of memory"
  bool fatal = true;        // false: a warning (AlertMatch::fatal)
  std::optional<int> rank;  // where the line says it
  int64_t time_us = 0;      // the line's time (its log record's timestamp)
  std::string stream;       // "out" or "err"
  std::vector<std::pair<std::string, std::string>> fields;  // "tried": "2.00 GiB", ...
  std::string line;  // the redacted line, at most kMaxAlertLineBytes (+ "…" marks where cut)
};

// One JSON object on one line (no newline); invalid UTF-8 in the line is replaced.
std::string AlertRecordToJson(const AlertRecord& record);
Result<AlertRecord> AlertRecordFromJson(std::string_view text);

// `line` cut to at most kMaxAlertLineBytes, keeping the text at `at` (where the match starts):
// "…" marks each cut end. Cuts fall on UTF-8 character boundaries.
std::string BoundAlertLine(std::string_view line, size_t at);

class AlertScanner {
 public:
  AlertScanner(std::string path, Env* env) : path_(std::move(path)), env_(env) {}

  // Matches one output line; appends a record when it is an alert within the bounds.
  void OnLine(std::string_view stream, std::string_view text, int64_t time_us);
  // Appends an alert found other than in a line (the OOM killer's counter, agent/oom_watch.h),
  // within the same bounds.
  void Record(AlertRecord record);

  int recorded() const { return recorded_; }
  int dropped() const { return dropped_; }  // matched past the bounds
  // The first failure to write the alerts file (later alerts are then not tried).
  const Status& status() const { return status_; }

 private:
  std::string path_;
  Env* env_;
  std::map<std::string, int> per_class_;
  int recorded_ = 0;
  int dropped_ = 0;
  Status status_;
};

}  // namespace air::agent
