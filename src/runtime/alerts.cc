// Ingesting the nodes' alerts files into the run's events, and showing alerts.
#include "runtime/alerts.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/time_format.h"

namespace air::runtime {
namespace {

using nlohmann::json;

std::string TimeText(int64_t micros) { return FormatUtcTimestamp(micros, 3); }

}  // namespace

std::vector<Alert> AlertsFromEvents(const std::vector<store::EventRecord>& events) {
  std::vector<Alert> alerts;
  for (const store::EventRecord& event : events) {
    if (event.kind != kAlertEventKind) continue;
    auto record = agent::AlertRecordFromJson(event.message);
    if (!record.ok()) continue;
    alerts.push_back({event.attempt.value_or(0), event.node_rank.value_or(0), std::move(*record)});
  }
  // Nodes' files are read one after the other: order by the lines' own times.
  std::stable_sort(alerts.begin(), alerts.end(), [](const Alert& a, const Alert& b) {
    return a.record.time_us < b.record.time_us;
  });
  return alerts;
}

std::optional<Alert> FirstAlert(const std::vector<Alert>& alerts) {
  std::optional<Alert> first;
  for (const Alert& alert : alerts) {
    if (alert.record.fatal && (!first || alert.record.time_us < first->record.time_us)) {
      first = alert;
    }
  }
  return first;
}

std::string AlertHeadline(const Alert& alert) {
  std::string text = fmt::format("{} on node {}", alert.record.title, alert.node);
  if (alert.record.rank) text += fmt::format(", rank {}", *alert.record.rank);
  std::vector<std::string> fields;
  for (const auto& [name, value] : alert.record.fields) {
    fields.push_back(fmt::format("{} {}", name, value));
  }
  if (!fields.empty()) {
    text += " (";
    for (size_t i = 0; i < fields.size(); ++i) text += (i ? ", " : "") + fields[i];
    text += ")";
  }
  return text;
}

json AlertJson(const Alert& alert) {
  json fields = json::object();
  for (const auto& [name, value] : alert.record.fields) fields[name] = value;
  return {{"attempt", alert.attempt},
          {"node", alert.node},
          {"rank", alert.record.rank ? json(*alert.record.rank) : json(nullptr)},
          {"class", alert.record.alert_class},
          {"title", alert.record.title},
          {"severity", alert.record.fatal ? "fatal" : "warning"},
          {"time", TimeText(alert.record.time_us)},
          {"time_us", alert.record.time_us},
          {"stream", alert.record.stream},
          {"fields", fields},
          {"headline", AlertHeadline(alert)},
          {"line", alert.record.line}};
}

std::string AlertsText(const std::vector<Alert>& alerts) {
  std::string text;
  for (const Alert& alert : alerts) {
    text += fmt::format("{} attempt {} {}\n    {}\n", TimeText(alert.record.time_us), alert.attempt,
                        AlertHeadline(alert), alert.record.line);
  }
  return text;
}

std::string AlertGroupsText(const std::vector<Alert>& alerts, size_t max_lines,
                            const std::string& indent) {
  struct Group {
    const Alert* first;
    int count;
  };
  std::vector<Group> groups;
  for (const Alert& alert : alerts) {
    bool found = false;
    for (Group& g : groups) {
      if (g.first->attempt == alert.attempt && g.first->node == alert.node &&
          g.first->record.alert_class == alert.record.alert_class) {
        ++g.count;
        found = true;
        break;
      }
    }
    if (!found) groups.push_back({&alert, 1});
  }
  std::string text;
  for (size_t i = 0; i < groups.size() && i < max_lines; ++i) {
    const Group& g = groups[i];
    text += fmt::format("{}{} attempt {} {}{}\n", indent, TimeText(g.first->record.time_us),
                        g.first->attempt, AlertHeadline(*g.first),
                        g.count > 1 ? fmt::format(" x{}", g.count) : "");
  }
  if (groups.size() > max_lines) {
    text +=
        fmt::format("{}... {} more (air logs RUN --alerts)\n", indent, groups.size() - max_lines);
  }
  return text;
}

AlertIngester::AlertIngester(store::Store* store, const Layout& layout, Env* env, int64_t run_id,
                             int attempt, int num_nodes)
    : store_(store),
      layout_(layout),
      env_(env),
      run_id_(run_id),
      attempt_(attempt),
      offsets_(static_cast<size_t>(num_nodes), 0),
      records_to_skip_(static_cast<size_t>(num_nodes), 0) {}

Status AlertIngester::Resume() {
  AIR_ASSIGN_OR_RETURN(auto events, store_->ListEvents(run_id_));
  std::vector<Alert> known;
  for (Alert& alert : AlertsFromEvents(events)) {
    if (alert.attempt != attempt_) continue;
    if (alert.node >= 0 && static_cast<size_t>(alert.node) < records_to_skip_.size()) {
      ++records_to_skip_[alert.node];
    }
    known.push_back(std::move(alert));
  }
  first_ = FirstAlert(known);
  return Status::Ok();
}

Status AlertIngester::Poll() {
  std::vector<Alert> fresh;
  for (size_t node = 0; node < offsets_.size(); ++node) ReadNode(static_cast<int>(node), &fresh);
  // Recorded in the order of the lines' own times.
  std::stable_sort(fresh.begin(), fresh.end(), [](const Alert& a, const Alert& b) {
    return a.record.time_us < b.record.time_us;
  });
  for (Alert& alert : fresh) {
    AIR_RETURN_IF_ERROR(store_->AppendEvent(
        run_id_, kAlertEventKind, agent::AlertRecordToJson(alert.record), attempt_, alert.node));
    if (alert.record.fatal && (!first_ || alert.record.time_us < first_->record.time_us)) {
      first_ = std::move(alert);
    }
  }
  return Status::Ok();
}

void AlertIngester::ReadNode(int node, std::vector<Alert>* fresh) {
  const std::string path = layout_.NodeAlertsFile(run_id_, attempt_, node);
  if (!env_->FileExists(path)) return;
  // The file is small: the agent records at most kMaxAlertsPerNode bounded lines.
  auto read = env_->ReadFile(path);
  if (!read.ok()) return;  // tried again at the next poll
  const std::string& text = *read;
  size_t& offset = offsets_[node];
  while (offset < text.size()) {
    size_t newline = text.find('\n', offset);
    if (newline == std::string::npos) break;  // the agent is still writing it
    std::string_view line(text.data() + offset, newline - offset);
    offset = newline + 1;
    if (records_to_skip_[node] > 0) {
      --records_to_skip_[node];
      continue;
    }
    auto record = agent::AlertRecordFromJson(line);
    if (!record.ok()) continue;  // not written by an agent: ignored
    fresh->push_back({attempt_, node, std::move(*record)});
  }
}

}  // namespace air::runtime
