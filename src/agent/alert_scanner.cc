// Matching a node's lines against the alert table and appending the alerts file.
#include "agent/alert_scanner.h"

#include <nlohmann/json.hpp>

#include "agent/alert_patterns.h"

namespace air::agent {
namespace {

// Ordered: a record keeps its fields in the table's order.
using RecordJson = nlohmann::ordered_json;

// The largest i <= pos that starts a UTF-8 character.
size_t CharStart(std::string_view s, size_t pos) {
  while (pos > 0 && pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace

std::string BoundAlertLine(std::string_view line, size_t at) {
  if (line.size() <= kMaxAlertLineBytes) return std::string(line);
  // Keep a little of what came before the match (the rank prefix, the exception's name).
  constexpr size_t kBefore = 128;
  size_t begin = CharStart(line, at > kBefore ? at - kBefore : 0);
  size_t end = CharStart(line, std::min(line.size(), begin + kMaxAlertLineBytes));
  if (end == line.size() && end - begin < kMaxAlertLineBytes) {
    begin = CharStart(line, line.size() - kMaxAlertLineBytes);
  }
  std::string out;
  if (begin > 0) out += "…";
  out.append(line.substr(begin, end - begin));
  if (end < line.size()) out += "…";
  return out;
}

std::string AlertRecordToJson(const AlertRecord& record) {
  RecordJson fields = RecordJson::object();
  for (const auto& [name, value] : record.fields) fields[name] = value;
  RecordJson out{{"class", record.alert_class},
                 {"title", record.title},
                 {"severity", record.fatal ? "fatal" : "warning"},
                 {"rank", record.rank ? RecordJson(*record.rank) : RecordJson(nullptr)},
                 {"time_us", record.time_us},
                 {"stream", record.stream},
                 {"fields", fields},
                 {"line", record.line}};
  return out.dump(-1, ' ', false, RecordJson::error_handler_t::replace);
}

Result<AlertRecord> AlertRecordFromJson(std::string_view text) {
  RecordJson j = RecordJson::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("class") || !j["class"].is_string() ||
      !j.contains("time_us") || !j["time_us"].is_number_integer()) {
    return InvalidArgument("not an alert record: " + std::string(text.substr(0, 200)));
  }
  AlertRecord record;
  record.alert_class = j["class"].get<std::string>();
  record.title = j.value("title", "");
  record.fatal = j.value("severity", "fatal") != "warning";
  if (j.contains("rank") && j["rank"].is_number_integer()) record.rank = j["rank"].get<int>();
  record.time_us = j["time_us"].get<int64_t>();
  record.stream = j.value("stream", "");
  if (j.contains("fields") && j["fields"].is_object()) {
    for (const auto& [name, value] : j["fields"].items()) {
      if (value.is_string()) record.fields.emplace_back(name, value.get<std::string>());
    }
  }
  record.line = j.value("line", "");
  return record;
}

void AlertScanner::OnLine(std::string_view stream, std::string_view text, int64_t time_us) {
  std::optional<AlertMatch> match = MatchAlertLine(text);
  if (!match) return;
  AlertRecord record;
  record.alert_class = match->alert_class;
  record.title = match->title;
  record.fatal = match->fatal;
  record.rank = match->rank;
  record.time_us = time_us;
  record.stream = std::string(stream);
  record.fields = std::move(match->fields);
  record.line = BoundAlertLine(text, match->at);
  Record(std::move(record));
}

void AlertScanner::Record(AlertRecord record) {
  int& in_class = per_class_[record.alert_class];
  if (!status_.ok() || in_class >= kMaxAlertsPerClass || recorded_ >= kMaxAlertsPerNode) {
    ++dropped_;
    return;
  }
  status_ = env_->AppendToFile(path_, AlertRecordToJson(record) + "\n");
  if (!status_.ok()) {
    status_ = status_.WithContext("record an alert in " + path_);
    ++dropped_;
    return;
  }
  ++in_class;
  ++recorded_;
}

}  // namespace air::agent
