// JSON lines of a node's system metrics file.
#include "agent/system_sample.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace air::agent {

const double* SystemSample::Find(const std::string& name) const {
  for (const auto& [key, value] : metrics) {
    if (key == name) return &value;
  }
  return nullptr;
}

std::string SystemSampleToLine(const SystemSample& sample) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["ts_us"] = sample.ts_us;
  if (!sample.note.empty()) {
    j["note"] = sample.note;
  } else {
    // In the measured order, rounded to 0.001 (MLflow's monitor rounds its averages to 0.1).
    nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
    for (const auto& [key, value] : sample.metrics) {
      if (std::isfinite(value)) metrics[key] = std::round(value * 1000) / 1000;
    }
    j["metrics"] = std::move(metrics);
  }
  return j.dump() + "\n";
}

Result<SystemSample> SystemSampleFromLine(const std::string& line, const std::string& path) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLoss(path + ": a system metrics line is not a JSON object: " + line.substr(0, 200));
  }
  try {
    SystemSample sample;
    sample.ts_us = j.at("ts_us").get<int64_t>();
    if (auto note = j.find("note"); note != j.end()) {
      sample.note = note->get<std::string>();
      if (sample.note.empty()) return DataLoss(path + ": a system metrics note is empty");
      return sample;
    }
    for (const auto& [key, value] : j.at("metrics").items()) {
      sample.metrics.emplace_back(key, value.get<double>());
    }
    return sample;
  } catch (const nlohmann::ordered_json::exception& e) {
    return DataLoss(
        fmt::format("{}: not a system metrics line ({}): {}", path, e.what(), line.substr(0, 200)));
  }
}

std::string SystemMetricPrefix(int node_rank) { return fmt::format("system/node_{}/", node_rank); }

}  // namespace air::agent
