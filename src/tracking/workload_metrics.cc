// Reads of the workload's metrics and params in the tracking tables (docs/store-schema.md).
#include "tracking/workload_metrics.h"

#include <fmt/format.h>

namespace air::tracking {
namespace {

// SQL true for the workload's own keys (not air's system metrics); exact, case-sensitive.
const char kWorkloadKey[] = "substr(key, 1, 7) != 'system/'";

}  // namespace

Result<std::string> WorkloadMetricMarker(store::Database* db, const std::string& run_uuid) {
  AIR_ASSIGN_OR_RETURN(
      store::Statement query,
      db->Query(fmt::format("SELECT COUNT(*), COALESCE(SUM(step), 0), COALESCE(MAX(timestamp), 0) "
                            "FROM tracking_latest_metrics WHERE run_uuid = ? AND {}",
                            kWorkloadKey),
                run_uuid));
  AIR_ASSIGN_OR_RETURN(bool row, query.Step());
  if (!row || query.ColumnInt(0) == 0) return std::string();
  return fmt::format("{}/{}/{}", query.ColumnInt(0), query.ColumnInt(1), query.ColumnInt(2));
}

Result<std::optional<StepSpan>> WorkloadStepSpan(store::Database* db, const std::string& run_uuid,
                                                 int64_t since_ms) {
  const std::string where =
      fmt::format("FROM tracking_metrics WHERE run_uuid = ? AND {} AND step > 0 AND timestamp >= ?",
                  kWorkloadKey);
  AIR_ASSIGN_OR_RETURN(store::Statement first, db->Query("SELECT step, timestamp " + where +
                                                             " ORDER BY timestamp, step LIMIT 1",
                                                         run_uuid, since_ms));
  AIR_ASSIGN_OR_RETURN(bool found, first.Step());
  if (!found) return std::optional<StepSpan>();
  StepSpan span;
  span.first = {first.ColumnInt(0), first.ColumnInt(1)};
  AIR_ASSIGN_OR_RETURN(
      store::Statement last,
      db->Query("SELECT step, timestamp " + where + " ORDER BY step DESC, timestamp DESC LIMIT 1",
                run_uuid, since_ms));
  AIR_ASSIGN_OR_RETURN(found, last.Step());
  span.last = found ? StepPoint{last.ColumnInt(0), last.ColumnInt(1)} : span.first;
  return std::optional<StepSpan>(span);
}

Result<std::optional<double>> LatestMetricValue(store::Database* db, const std::string& run_uuid,
                                                const std::string& key, int64_t since_ms) {
  AIR_ASSIGN_OR_RETURN(
      store::Statement query,
      db->Query("SELECT value, is_nan FROM tracking_metrics WHERE run_uuid = ? AND key = ? AND "
                "timestamp >= ? ORDER BY step DESC, timestamp DESC LIMIT 1",
                run_uuid, key, since_ms));
  AIR_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found || query.ColumnInt(1) != 0) return std::optional<double>();
  return std::optional<double>(query.ColumnDouble(0));
}

Result<std::optional<std::string>> RunParam(store::Database* db, const std::string& run_uuid,
                                            const std::string& key) {
  AIR_ASSIGN_OR_RETURN(
      store::Statement query,
      db->Query("SELECT value FROM tracking_params WHERE run_uuid = ? AND key = ?", run_uuid, key));
  AIR_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) return std::optional<std::string>();
  return std::optional<std::string>(query.ColumnText(0));
}

}  // namespace air::tracking
