// How runs are shown by `air get`, `air list` and `air run --watch`: one JSON object per run
// (stable field names, documented in docs/state-machine.md) and the matching text.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/alerts.h"
#include "runtime/progress.h"
#include "store/store.h"

namespace air::runtime {

struct RunDetails {
  store::RunRecord run;
  std::vector<store::AttemptRecord> attempts;
  std::vector<std::vector<store::NodeRecord>> nodes;  // per attempt
  // While the live attempt waits in a scheduler's queue (Slurm): its reason ("Resources").
  // The run is then shown as PENDING ("queued: Resources") though the store says RUNNING.
  std::string queue_reason;
  std::string scheduler_note;  // the scheduler's latest word on the live attempt
  std::vector<Alert> alerts;   // every attempt's alerts (runtime/alerts.h), as recorded
  // Filled by callers that show it (runtime/run_progress.h): `progress` in JSON, rows in text.
  std::optional<RunProgress> progress;
};

Result<RunDetails> LoadRunDetails(store::Store* store, const store::RunRecord& run);

// RunDetails::queue_reason alone (for lists): "" unless the run's live attempt waits in a queue.
Result<std::string> LoadQueueReason(store::Store* store, const store::RunRecord& run);

// "2.5 s", "3 min 4 s", "1 h 2 min".
std::string FormatDuration(int64_t micros);
// ISO-8601 UTC with milliseconds.
std::string FormatTime(int64_t micros);

// With a `queue_reason`, the run shows as PENDING with that reason (as `air get` shows it).
nlohmann::json RunSummaryJson(const store::RunRecord& run, int64_t now_us,
                              const std::string& queue_reason = "");
nlohmann::json RunDetailsJson(const RunDetails& details, int64_t now_us);
std::string RunDetailsText(const RunDetails& details, int64_t now_us);
// `queue_reasons` (empty, or one per run): queued runs show as "PENDING (Resources)".
std::string RunListText(const std::vector<store::RunRecord>& runs, int64_t now_us,
                        const std::vector<std::string>& queue_reasons = {});

}  // namespace air::runtime
