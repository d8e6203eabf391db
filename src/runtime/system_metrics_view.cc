// The latest system metrics sample per node, for `air get`.
#include "runtime/system_metrics_view.h"

#include <fmt/format.h>

#include "base/strings.h"
#include "base/time_format.h"
#include "runtime/log_reader.h"

namespace air::runtime {
namespace {

// The last sample (not note) among the file's last lines, if any.
std::optional<agent::SystemSample> LastSample(const std::string& path, Env* env) {
  if (!env->FileExists(path)) return std::nullopt;
  auto lines = ReadLastLines(env, path, 4);
  if (!lines.ok()) return std::nullopt;
  for (auto it = lines->rbegin(); it != lines->rend(); ++it) {
    auto sample = agent::SystemSampleFromLine(*it, path);
    if (sample.ok() && sample->note.empty()) return *sample;
  }
  return std::nullopt;
}

std::string Number(const agent::SystemSample& sample, const std::string& name, const char* unit,
                   int decimals = 1) {
  const double* value = sample.Find(name);
  return value ? fmt::format("{:.{}f}{}", *value, decimals, unit) : std::string("?");
}

}  // namespace

LatestSystemSamples LoadLatestSystemSamples(const Layout& layout, const RunDetails& details,
                                            Env* env) {
  LatestSystemSamples latest;
  for (auto a = details.attempts.rbegin(); a != details.attempts.rend(); ++a) {
    for (int rank = 0; rank < a->num_nodes; ++rank) {
      auto sample = LastSample(layout.NodeMetricsFile(details.run.id, a->attempt, rank), env);
      if (sample) latest.nodes.push_back({rank, std::move(*sample)});
    }
    if (!latest.nodes.empty()) {
      latest.attempt = a->attempt;
      break;
    }
  }
  return latest;
}

nlohmann::json LatestSystemSamplesJson(const LatestSystemSamples& latest) {
  if (latest.attempt < 0) return nullptr;
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeSystemSample& node : latest.nodes) {
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [name, value] : node.sample.metrics) metrics[name] = value;
    nodes.push_back({{"node_rank", node.node_rank},
                     {"ts_us", node.sample.ts_us},
                     {"time", FormatUtcTimestamp(node.sample.ts_us, 0)},
                     {"metrics", metrics}});
  }
  return {{"attempt", latest.attempt}, {"nodes", nodes}};
}

std::string LatestSystemSamplesText(const LatestSystemSamples& latest) {
  if (latest.attempt < 0) return "";
  std::string text;
  auto row = [&text](const std::string& value) {
    text += fmt::format("  {:<12} {}\n", text.empty() ? "system" : "", value);
  };
  for (const NodeSystemSample& node : latest.nodes) {
    const agent::SystemSample& s = node.sample;
    row(fmt::format(
        "node {} at {}: cpu {}, memory {}, disk read/write {}/{} MB, network in/out {}/{} MB",
        node.node_rank, FormatUtcTimestamp(s.ts_us, 0),
        Number(s, "cpu_utilization_percentage", "%"),
        Number(s, "system_memory_usage_megabytes", " MB"), Number(s, "disk_read_megabytes", ""),
        Number(s, "disk_write_megabytes", ""), Number(s, "network_receive_megabytes", ""),
        Number(s, "network_transmit_megabytes", "")));
    for (int gpu = 0; s.Find(fmt::format("gpu_{}_utilization_percentage", gpu)) ||
                      s.Find(fmt::format("gpu_{}_memory_usage_megabytes", gpu));
         ++gpu) {
      const std::string p = fmt::format("gpu_{}_", gpu);
      row(fmt::format("node {} gpu {}: {} busy, memory {}/{} MB, {}, {}", node.node_rank, gpu,
                      Number(s, p + "utilization_percentage", "%", 0),
                      Number(s, p + "memory_usage_megabytes", "", 0),
                      Number(s, p + "memory_total_megabytes", "", 0),
                      Number(s, p + "power_usage_watts", " W"),
                      Number(s, p + "temperature_celsius", " C", 0)));
    }
  }
  return text;
}

}  // namespace air::runtime
