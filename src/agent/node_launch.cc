// JSON encoding of the agent's launch file and reports.
#include "agent/node_launch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

namespace air::agent {
namespace {

using nlohmann::json;

Result<json> ParseObject(const std::string& text, const std::string& path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLoss(path + ": not a JSON object");
  return j;
}

template <typename T>
std::optional<T> OptionalField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->template get<T>();
}

}  // namespace

std::string NodeLaunchToJson(const NodeLaunch& l) {
  json env = json::array();
  for (const auto& [name, value] : l.env) env.push_back({name, value});
  json j = {{"run_id", l.run_id},
            {"attempt", l.attempt},
            {"node_rank", l.node_rank},
            {"command", l.command},
            {"shell", l.shell},
            {"workdir", l.workdir},
            {"log_path", l.log_path},
            {"started_path", l.started_path},
            {"exit_path", l.exit_path},
            {"tracker_path", l.tracker_path},
            {"env", env},
            {"secret_names", l.secret_names},
            {"grace_seconds", l.grace_seconds},
            {"volumes_root", l.volumes_root},
            {"volumes_required", l.volumes_required},
            {"log_max_bytes", l.log_max_bytes},
            {"log_keep", l.log_keep},
            {"system_metrics_interval_s", l.system_metrics_interval_s},
            {"metrics_path", l.metrics_path}};
  return j.dump(2);
}

Result<NodeLaunch> NodeLaunchFromJson(const std::string& text, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(json j, ParseObject(text, path));
  try {
    NodeLaunch l;
    l.run_id = j.at("run_id").get<int64_t>();
    l.attempt = j.at("attempt").get<int>();
    l.node_rank = j.at("node_rank").get<int>();
    l.command = j.at("command").get<std::string>();
    l.shell = j.at("shell").get<std::string>();
    l.workdir = j.at("workdir").get<std::string>();
    l.log_path = j.at("log_path").get<std::string>();
    l.started_path = j.at("started_path").get<std::string>();
    l.exit_path = j.at("exit_path").get<std::string>();
    l.tracker_path = OptionalField<std::string>(j, "tracker_path").value_or("");
    for (const auto& pair : j.at("env")) {
      l.env.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
    }
    l.secret_names = j.at("secret_names").get<std::vector<std::string>>();
    l.grace_seconds = j.at("grace_seconds").get<int>();
    l.volumes_root = j.value("volumes_root", std::string());
    l.volumes_required = j.value("volumes_required", true);
    l.log_max_bytes = j.value("log_max_bytes", uint64_t{0});
    l.log_keep = j.value("log_keep", 2);
    l.system_metrics_interval_s = j.value("system_metrics_interval_s", 0);
    l.metrics_path = j.value("metrics_path", std::string());
    return l;
  } catch (const json::exception& e) {
    return DataLoss(path + ": not a node launch file: " + e.what());
  }
}

std::string NodeStartedToJson(const NodeStarted& s) {
  return json{{"agent_pid", s.agent_pid},
              {"pid", s.pid},
              {"pgid", s.pgid},
              {"started_us", s.started_us},
              {"host", s.host}}
      .dump();
}

Result<NodeStarted> NodeStartedFromJson(const std::string& text, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(json j, ParseObject(text, path));
  try {
    NodeStarted s;
    s.agent_pid = j.at("agent_pid").get<int64_t>();
    s.pid = j.at("pid").get<int64_t>();
    s.pgid = j.at("pgid").get<int64_t>();
    s.started_us = j.at("started_us").get<int64_t>();
    s.host = j.value("host", "");
    return s;
  } catch (const json::exception& e) {
    return DataLoss(path + ": not a start report: " + e.what());
  }
}

std::string NodeExitReportToJson(const NodeExitReport& r) {
  json j = {{"exit_code", nullptr},   {"signal", nullptr}, {"stopped_by_air", r.stopped_by_air},
            {"pid", r.pid},           {"pgid", r.pgid},    {"started_us", r.started_us},
            {"ended_us", r.ended_us}, {"error", r.error}};
  if (r.exit_code) j["exit_code"] = *r.exit_code;
  if (r.signal) j["signal"] = *r.signal;
  return j.dump();
}

Result<NodeExitReport> NodeExitReportFromJson(const std::string& text, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(json j, ParseObject(text, path));
  try {
    NodeExitReport r;
    r.exit_code = OptionalField<int>(j, "exit_code");
    r.signal = OptionalField<int>(j, "signal");
    r.stopped_by_air = j.at("stopped_by_air").get<bool>();
    r.pid = j.at("pid").get<int64_t>();
    r.pgid = j.at("pgid").get<int64_t>();
    r.started_us = j.at("started_us").get<int64_t>();
    r.ended_us = j.at("ended_us").get<int64_t>();
    r.error = j.at("error").get<std::string>();
    return r;
  } catch (const json::exception& e) {
    return DataLoss(path + ": not an exit report: " + e.what());
  }
}

std::string TrackerPath(const NodeLaunch& launch) {
  if (!launch.tracker_path.empty()) return launch.tracker_path;
  std::string path = launch.started_path;
  const std::string suffix = ".started";
  if (path.size() > suffix.size() && path.ends_with(suffix))
    path.resize(path.size() - suffix.size());
  return path + ".tracker";
}

std::string AlertsPath(const NodeLaunch& launch) {
  std::string path = launch.exit_path;
  const std::string suffix = ".exit";
  if (path.size() > suffix.size() && path.ends_with(suffix))
    path.resize(path.size() - suffix.size());
  return path + ".alerts";
}

Result<NodeStarted> ReadNodeStarted(Env* env, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return NodeStartedFromJson(text, path);
}

Result<NodeExitReport> ReadNodeExitReport(Env* env, const std::string& path) {
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  return NodeExitReportFromJson(text, path);
}

}  // namespace air::agent
