// MLflow's REST JSON for air's tracking entities (the protobuf JSON mapping MLflow uses: int64
// as numbers, NaN as "NaN", +-inf as "Infinity"/"-Infinity"), and reading request fields with
// MLflow's messages for a missing or mistyped one.
// Request bodies are parsed with a depth limit: a check over the parser's SAX events runs first,
// so a body nested 150,000 levels deep is a 400, never a deep tree or a crash.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tracking/entities.h"

namespace air::server {

nlohmann::json ExperimentJson(const tracking::Experiment& e);
nlohmann::json RunInfoJson(const tracking::RunInfo& info);
nlohmann::json RunJson(const tracking::Run& run);
nlohmann::json MetricJson(const tracking::Metric& m);

inline constexpr size_t kMaxJsonDepth = 64;

// `text` as a JSON object nested at most `max_depth` levels (objects and arrays); a clear
// kInvalidArgument ("Malformed request: ...") for anything else.
Result<nlohmann::json> ParseJsonObject(std::string_view text, size_t max_depth = kMaxJsonDepth);

// A request's fields: a JSON body (POST) or the query string (GET), one object either way.
class Fields {
 public:
  explicit Fields(nlohmann::json object) : j_(std::move(object)) {}
  // MLflow's "Missing value for required parameter 'x'." when absent or empty.
  Result<std::string> RequiredString(const std::string& name) const;
  std::optional<std::string> OptionalString(const std::string& name) const;
  Result<std::optional<int64_t>> OptionalInt(const std::string& name) const;
  // run_id, falling back to the deprecated run_uuid.
  Result<std::string> RunId() const;
  const nlohmann::json& json() const { return j_; }

 private:
  nlohmann::json j_;
};

// A metric from {"key", "value", "timestamp", "step"}; `path` prefixes field names in errors.
Result<tracking::Metric> MetricFromJson(const nlohmann::json& j, const std::string& path);
Result<tracking::KeyValue> KeyValueFromJson(const nlohmann::json& j, const std::string& path);

}  // namespace air::server
