// MLflow REST JSON encoding and request-field reading.
#include "server/mlflow_json.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace air::server {

using nlohmann::json;

namespace {

json DoubleJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

json KeyValuesJson(const std::vector<tracking::KeyValue>& entries) {
  json out = json::array();
  for (const auto& kv : entries) out.push_back({{"key", kv.key}, {"value", kv.value}});
  return out;
}

Status Missing(const std::string& name) {
  return InvalidArgument(fmt::format(
      "Missing value for required parameter '{}'. See the API docs for more information about "
      "request parameters.",
      name));
}

Status BadType(const std::string& name, const json& value, const char* want) {
  return InvalidArgument(fmt::format(
      "Invalid value {} for parameter '{}' supplied: Hint: Value was of type '{}'; expected {}. "
      "See the API docs for more information about request parameters.",
      value.dump(), name, value.type_name(), want));
}

// int64 fields arrive as numbers, or as strings (protobuf JSON, and every GET query value).
Result<int64_t> ToInt(const json& v, const std::string& name) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && errno == 0) return static_cast<int64_t>(parsed);
  }
  return BadType(name, v, "an integer");
}

// Counts nesting over SAX events and stops the parse past the limit.
class DepthCheck : public nlohmann::json_sax<json> {
 public:
  explicit DepthCheck(size_t max_depth) : max_depth_(max_depth) {}
  bool too_deep() const { return too_deep_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Enter(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return Leave(); }
  bool start_array(std::size_t) override { return Enter(); }
  bool end_array() override { return Leave(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override {
    return false;
  }

 private:
  bool Enter() {
    if (++depth_ > max_depth_) too_deep_ = true;
    return !too_deep_;
  }
  bool Leave() {
    --depth_;
    return true;
  }
  size_t max_depth_;
  size_t depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

Result<json> ParseJsonObject(std::string_view text, size_t max_depth) {
  DepthCheck check(max_depth);
  const bool parsed = json::sax_parse(text, &check);
  if (check.too_deep()) {
    return InvalidArgument(
        fmt::format("Malformed request: the JSON body is nested deeper than {} levels", max_depth));
  }
  json body = parsed ? json::parse(text, nullptr, false) : json(json::value_t::discarded);
  if (body.is_discarded() || !body.is_object()) {
    return InvalidArgument(
        "Malformed request: the body is not a JSON object (send Content-Type: application/json "
        "with a JSON object)");
  }
  return body;
}

json ExperimentJson(const tracking::Experiment& e) {
  json tags = json::array();
  for (const auto& [k, v] : e.tags) tags.push_back({{"key", k}, {"value", v}});
  json out = {{"experiment_id", e.experiment_id},         {"name", e.name},
              {"artifact_location", e.artifact_location}, {"lifecycle_stage", e.lifecycle_stage},
              {"creation_time", e.creation_time},         {"last_update_time", e.last_update_time}};
  if (!tags.empty()) out["tags"] = tags;
  return out;
}

json RunInfoJson(const tracking::RunInfo& info) {
  json out = {{"run_id", info.run_id},
              {"run_uuid", info.run_id},
              {"experiment_id", info.experiment_id},
              {"run_name", info.run_name},
              {"user_id", info.user_id},
              {"status", info.status},
              {"start_time", info.start_time},
              {"artifact_uri", info.artifact_uri},
              {"lifecycle_stage", info.lifecycle_stage}};
  if (info.end_time) out["end_time"] = *info.end_time;
  return out;
}

json MetricJson(const tracking::Metric& m) {
  return {
      {"key", m.key}, {"value", DoubleJson(m.value)}, {"timestamp", m.timestamp}, {"step", m.step}};
}

json RunJson(const tracking::Run& run) {
  json metrics = json::array();
  for (const auto& m : run.metrics) metrics.push_back(MetricJson(m));
  json data = json::object();
  if (!metrics.empty()) data["metrics"] = metrics;
  if (!run.params.empty()) data["params"] = KeyValuesJson(run.params);
  if (!run.tags.empty()) data["tags"] = KeyValuesJson(run.tags);
  return {{"info", RunInfoJson(run.info)}, {"data", data}, {"inputs", json::object()}};
}

Result<std::string> Fields::RequiredString(const std::string& name) const {
  auto it = j_.find(name);
  if (it == j_.end() || it->is_null()) return Missing(name);
  if (!it->is_string()) return BadType(name, *it, "a string");
  if (it->get_ref<const std::string&>().empty()) return Missing(name);
  return it->get<std::string>();
}

std::optional<std::string> Fields::OptionalString(const std::string& name) const {
  auto it = j_.find(name);
  if (it == j_.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

Result<std::optional<int64_t>> Fields::OptionalInt(const std::string& name) const {
  auto it = j_.find(name);
  if (it == j_.end() || it->is_null()) return std::optional<int64_t>();
  AIR_ASSIGN_OR_RETURN(int64_t v, ToInt(*it, name));
  return std::optional<int64_t>(v);
}

Result<std::string> Fields::RunId() const {
  if (auto id = OptionalString("run_id"); id && !id->empty()) return *id;
  if (auto id = OptionalString("run_uuid"); id && !id->empty()) return *id;
  return Missing("run_id");
}

Result<tracking::Metric> MetricFromJson(const json& j, const std::string& path) {
  auto name = [&](const char* field) { return path.empty() ? field : path + "." + field; };
  if (!j.is_object()) return BadType(path, j, "an object");
  tracking::Metric m;
  auto key = j.find("key");
  if (key == j.end() || key->is_null()) return Missing(name("key"));
  if (!key->is_string()) return BadType(name("key"), *key, "a string");
  m.key = key->get<std::string>();
  auto value = j.find("value");
  if (value == j.end() || value->is_null()) return Missing(name("value"));
  if (value->is_number()) {
    m.value = value->get<double>();
  } else if (value->is_string() && *value == "NaN") {
    m.value = std::numeric_limits<double>::quiet_NaN();
  } else if (value->is_string() && *value == "Infinity") {
    m.value = std::numeric_limits<double>::infinity();
  } else if (value->is_string() && *value == "-Infinity") {
    m.value = -std::numeric_limits<double>::infinity();
  } else {
    return BadType(name("value"), *value, "a double (or \"NaN\", \"Infinity\", \"-Infinity\")");
  }
  auto timestamp = j.find("timestamp");
  if (timestamp == j.end() || timestamp->is_null()) return Missing(name("timestamp"));
  AIR_ASSIGN_OR_RETURN(m.timestamp, ToInt(*timestamp, name("timestamp")));
  if (auto step = j.find("step"); step != j.end() && !step->is_null()) {
    AIR_ASSIGN_OR_RETURN(m.step, ToInt(*step, name("step")));
  }
  return m;
}

Result<tracking::KeyValue> KeyValueFromJson(const json& j, const std::string& path) {
  if (!j.is_object()) return BadType(path, j, "an object");
  tracking::KeyValue kv;
  for (auto [field, out] : {std::pair{"key", &kv.key}, std::pair{"value", &kv.value}}) {
    std::string full = path.empty() ? field : path + "." + field;
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) {
      if (std::string(field) == "value") continue;  // an empty value is sent as absent
      return Missing(full);
    }
    if (!it->is_string()) return BadType(full, *it, "a string");
    *out = it->get<std::string>();
  }
  return kv;
}

}  // namespace air::server
