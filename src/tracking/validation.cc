// MLflow's validation rules and messages.
#include "tracking/validation.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "base/strings.h"

namespace air::tracking {
namespace {

// Python's posixpath.normpath, for MLflow's "must not resolve to other names" rule.
std::string NormPath(const std::string& path) {
  if (path.empty()) return ".";
  bool absolute = path[0] == '/';
  std::vector<std::string> parts;
  for (const std::string& part : Split(path, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else if (part != ".." || !absolute) {
      parts.push_back(part);
    }
  }
  std::string out = (absolute ? "/" : "") + Join(parts, "/");
  return out.empty() ? "." : out;
}

bool IsNameChar(unsigned char c) {
  // \w in Python's re on str: letters, digits and underscore, Unicode included (any byte of a
  // multi-byte UTF-8 sequence is accepted here).
  return std::isalnum(c) || c == '_' || c == '/' || c == '.' || c == '-' || c == ' ' || c == ':' ||
         c >= 0x80;
}

std::string InvalidValue(const std::string& path, const std::string& value,
                         const std::string& suffix) {
  return fmt::format("Invalid value \"{}\" for parameter '{}' supplied: {}", value, path, suffix);
}

Status LengthLimit(const std::string& entity, size_t limit, const std::string& value) {
  if (value.size() <= limit) return Status::Ok();
  return InvalidArgument(
      fmt::format("'{}' exceeds the maximum length of {} characters", entity, limit));
}

std::string JoinPath(const std::string& path, const std::string& field) {
  return path.empty() ? field : path + "." + field;
}

}  // namespace

Status ValidateKeyName(const std::string& name, const std::string& what) {
  for (unsigned char c : name) {
    if (!IsNameChar(c)) {
      return InvalidArgument(InvalidValue(
          what, name,
          "Names may only contain alphanumerics, underscores (_), dashes (-), periods (.), "
          "spaces ( ), colon(:) and slashes (/)."));
    }
  }
  std::string norm = NormPath(name);
  if (norm != name || norm == "." || StartsWith(norm, "..") || StartsWith(norm, "/")) {
    return InvalidArgument(InvalidValue(
        what, name,
        fmt::format("Names may be treated as files in certain cases, and must not resolve to "
                    "other names when treated as such. This name would resolve to '{}'",
                    norm)));
  }
  return Status::Ok();
}

Status ValidateMetric(const Metric& metric, const std::string& path) {
  AIR_RETURN_IF_ERROR(ValidateKeyName(metric.key, JoinPath(path, "name")));
  if (metric.timestamp < 0) {
    return InvalidArgument(InvalidValue(
        JoinPath(path, "timestamp"), std::to_string(metric.timestamp),
        fmt::format("metric '{}' (value={}). Timestamp must be a nonnegative long (64-bit "
                    "integer) ",
                    metric.key, metric.value)));
  }
  return LengthLimit("Metric name", kMaxEntityKeyLength, metric.key);
}

Status ValidateParam(const KeyValue& param, const std::string& path) {
  AIR_RETURN_IF_ERROR(ValidateKeyName(param.key, JoinPath(path, "key")));
  AIR_RETURN_IF_ERROR(LengthLimit("Param key", kMaxEntityKeyLength, param.key));
  return LengthLimit("Param value", kMaxParamValueLength, param.value);
}

Status ValidateTag(const KeyValue& tag, const std::string& path) {
  AIR_RETURN_IF_ERROR(ValidateKeyName(tag.key, JoinPath(path, "key")));
  AIR_RETURN_IF_ERROR(LengthLimit(JoinPath(path, "key"), kMaxEntityKeyLength, tag.key));
  return LengthLimit(JoinPath(path, "value"), kMaxTagValueLength, tag.value);
}

Status ValidateBatch(const Batch& batch) {
  if (batch.metrics.size() > kMaxMetricsPerBatch) {
    return InvalidArgument(fmt::format(
        "A batch logging request can contain at most {} metrics. Got {} metrics. Please split "
        "up metrics across multiple requests and try again.",
        kMaxMetricsPerBatch, batch.metrics.size()));
  }
  if (batch.params.size() > kMaxParamsTagsPerBatch) {
    return InvalidArgument(fmt::format(
        "A batch logging request can contain at most {} params. Got {} params. Please split up "
        "params across multiple requests and try again.",
        kMaxParamsTagsPerBatch, batch.params.size()));
  }
  if (batch.tags.size() > kMaxParamsTagsPerBatch) {
    return InvalidArgument(fmt::format(
        "A batch logging request can contain at most {} tags. Got {} tags. Please split up tags "
        "across multiple requests and try again.",
        kMaxParamsTagsPerBatch, batch.tags.size()));
  }
  size_t total = batch.metrics.size() + batch.params.size() + batch.tags.size();
  if (total > kMaxEntitiesPerBatch) {
    return InvalidArgument(fmt::format(
        "A batch logging request can contain at most {} metrics, params, and tags in total. Got "
        "{} entities. Please split up the entities across multiple requests and try again.",
        kMaxEntitiesPerBatch, total));
  }
  for (size_t i = 0; i < batch.metrics.size(); ++i) {
    AIR_RETURN_IF_ERROR(ValidateMetric(batch.metrics[i], fmt::format("metrics[{}]", i)));
  }
  std::set<std::string> keys;
  std::vector<std::string> dupes;
  for (size_t i = 0; i < batch.params.size(); ++i) {
    AIR_RETURN_IF_ERROR(ValidateParam(batch.params[i], fmt::format("params[{}]", i)));
    if (!keys.insert(batch.params[i].key).second) dupes.push_back("'" + batch.params[i].key + "'");
  }
  if (!dupes.empty()) {
    return InvalidArgument(fmt::format(
        "Duplicate parameter keys have been submitted: [{}]. Please ensure the request contains "
        "only one param value per param key.",
        Join(dupes, ", ")));
  }
  for (size_t i = 0; i < batch.tags.size(); ++i) {
    AIR_RETURN_IF_ERROR(ValidateTag(batch.tags[i], fmt::format("tags[{}]", i)));
  }
  return Status::Ok();
}

Status ValidateExperimentName(const std::string& name) {
  if (name.empty()) {
    return InvalidArgument(
        "Invalid experiment name: ''. Experiment name must be a non-empty string.");
  }
  return LengthLimit("Experiment name", kMaxExperimentNameLength, name);
}

Status RunNotActive(const std::string& run_id, const std::string& lifecycle_stage) {
  return InvalidArgument(fmt::format(
      "The run {} must be in the 'active' state. Current state is {}.", run_id, lifecycle_stage));
}

}  // namespace air::tracking
