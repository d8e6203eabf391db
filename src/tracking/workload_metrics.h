// What the runtime reads back from a tracking run in air's store about the workload's own
// metrics: a marker that changes whenever the workload logs a point (hang detection,
// runtime/hang_watch.h), the span of steps it logged (progress, runtime/progress.h), the latest
// value of one metric and one param. Air's own samples (keys under "system/", MLflow's system
// metrics) are not the workload's and are left out everywhere here.
// Thread safety: stateless functions over the caller's connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "store/sqlite.h"

namespace air::tracking {

// Metric keys under this prefix are sampled by air (system metrics), not logged by the workload.
inline constexpr std::string_view kSystemMetricPrefix = "system/";

// A text that changes whenever the workload logs a new latest point of any metric of `run_uuid`
// (number of keys, sum of latest steps, newest timestamp). "" when it has none.
Result<std::string> WorkloadMetricMarker(store::Database* db, const std::string& run_uuid);

struct StepPoint {
  int64_t step = 0;
  int64_t timestamp_ms = 0;
};
// The first point logged at or after `since_ms` with a step > 0 (the earliest), and the point
// of the furthest step (its latest time). nullopt when there is none.
struct StepSpan {
  StepPoint first;
  StepPoint last;
};
Result<std::optional<StepSpan>> WorkloadStepSpan(store::Database* db, const std::string& run_uuid,
                                                 int64_t since_ms);

// The latest value of metric `key` logged at or after `since_ms`; nullopt when none.
Result<std::optional<double>> LatestMetricValue(store::Database* db, const std::string& run_uuid,
                                                const std::string& key, int64_t since_ms);

// The value of param `key`; nullopt when not logged.
Result<std::optional<std::string>> RunParam(store::Database* db, const std::string& run_uuid,
                                            const std::string& key);

}  // namespace air::tracking
