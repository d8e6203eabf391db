// MLflow's validation rules for what a client logs (mlflow/utils/validation.py, MLflow 3.x):
// key names, length limits, batch limits, metric values and timestamps. Every message is the
// one MLflow's server returns for the same input, so clients see the errors they expect.
// Air refuses an over-long param or tag value instead of truncating it (MLflow truncates when
// MLFLOW_TRUNCATE_LONG_VALUES is on): nothing is stored other than what was sent.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "base/status.h"
#include "tracking/entities.h"

namespace air::tracking {

inline constexpr size_t kMaxEntityKeyLength = 250;
inline constexpr size_t kMaxParamValueLength = 6000;
inline constexpr size_t kMaxTagValueLength = 8000;
inline constexpr size_t kMaxExperimentNameLength = 500;
inline constexpr size_t kMaxParamsTagsPerBatch = 100;
inline constexpr size_t kMaxMetricsPerBatch = 1000;
inline constexpr size_t kMaxEntitiesPerBatch = 1000;
inline constexpr size_t kMaxBatchRequestBytes = 1000000;

// `what` is the JSON path MLflow names in its message ("key", "metrics[3].key", ...).
Status ValidateKeyName(const std::string& name, const std::string& what);
Status ValidateMetric(const Metric& metric, const std::string& path = "");
Status ValidateParam(const KeyValue& param, const std::string& path = "");
Status ValidateTag(const KeyValue& tag, const std::string& path = "");
// Counts and per-entry rules, and no param key twice.
Status ValidateBatch(const Batch& batch);
Status ValidateExperimentName(const std::string& name);

// MLflow's "must be in the 'active' state" error for a deleted run.
Status RunNotActive(const std::string& run_id, const std::string& lifecycle_stage);

}  // namespace air::tracking
