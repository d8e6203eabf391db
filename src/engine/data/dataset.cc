// Dataset files and records (see dataset.h).
#include "engine/data/dataset.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/strings.h"
#include "engine/data/json_util.h"
#include "engine/hf_cache_dirs.h"

namespace air::engine {
namespace {

using nlohmann::json;

std::string KeysOf(const json& object) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : object.items()) keys.push_back("\"" + k + "\"");
  return keys.empty() ? "none" : Join(keys, ", ");
}

// Byte offsets where the elements of a top-level JSON array start (the text parsed already).
std::vector<size_t> ArrayElementOffsets(std::string_view text) {
  std::vector<size_t> offsets;
  size_t i = text.find('[');
  if (i == std::string_view::npos) return offsets;
  ++i;
  int depth = 0;
  bool expecting_element = true;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (depth == 0 && expecting_element && c != ']') {
      offsets.push_back(i);
      expecting_element = false;
    }
    if (c == '"') {  // skip the string, honoring escapes
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) break;  // end of the top-level array
      --depth;
    } else if (c == ',' && depth == 0) {
      expecting_element = true;
    }
  }
  return offsets;
}

// The data files of a dataset directory, or a NotFound listing the names looked for.
Result<std::vector<std::string>> FilesInDirectory(const std::string& dir, Env* env) {
  for (const char* name : {"train.jsonl", "train.json", "data/train.jsonl", "data/train.json"}) {
    std::string path = dir + "/" + name;
    if (env->FileExists(path) && !env->IsDirectory(path)) return std::vector<std::string>{path};
  }
  std::vector<std::string> shards;
  if (env->IsDirectory(dir + "/data")) {
    AIR_ASSIGN_OR_RETURN(auto names, env->ListDir(dir + "/data"));
    for (const std::string& name : names) {
      if (StartsWith(name, "train-") && (EndsWith(name, ".jsonl") || EndsWith(name, ".json"))) {
        shards.push_back(dir + "/data/" + name);
      }
    }
  }
  if (!shards.empty()) return shards;  // ListDir is sorted, so shards are in order
  std::string listing;
  if (auto names = env->ListDir(dir); names.ok()) listing = Join(*names, ", ");
  return NotFound(fmt::format(
      "dataset directory {} has no train.jsonl, train.json, data/train.jsonl, data/train.json "
      "or data/train-*.jsonl (it holds: {}); parquet and arrow files are not read, convert them "
      "to JSON lines",
      dir, listing.empty() ? "nothing" : listing));
}

bool LooksLikeHubId(const std::string& name) {
  if (name.empty() || name[0] == '/' || name[0] == '.' || name[0] == '~') return false;
  auto parts = Split(name, '/');
  return parts.size() == 2 && !parts[0].empty() && !parts[1].empty();
}

Result<std::string> RequiredString(const json& record, const char* field, const std::string& where,
                                   const char* expected) {
  if (!record.contains(field)) {
    return InvalidArgument(fmt::format("{}: field \"{}\" is missing; {} (the record has: {})",
                                       where, field, expected, KeysOf(record)));
  }
  if (!record[field].is_string()) {
    return InvalidArgument(fmt::format("{}: field \"{}\" must be a string, got {}", where, field,
                                       record[field].type_name()));
  }
  return record[field].get<std::string>();
}

}  // namespace

Result<std::vector<std::string>> ResolveDataset(const std::string& dataset_name, Env* env) {
  if (dataset_name.empty()) return InvalidArgument("dataset_name is empty");
  if (env->IsDirectory(dataset_name)) return FilesInDirectory(dataset_name, env);
  if (env->FileExists(dataset_name)) return std::vector<std::string>{dataset_name};
  std::vector<std::string> looked = {dataset_name + " (no such file or directory)"};
  if (LooksLikeHubId(dataset_name)) {
    auto parts = Split(dataset_name, '/');
    for (const std::string& cache : HfHubCacheDirs(env)) {
      std::string repo = cache + "/datasets--" + parts[0] + "--" + parts[1];
      std::string ref = repo + "/refs/main";
      if (env->FileExists(ref)) {
        AIR_ASSIGN_OR_RETURN(std::string revision, env->ReadFile(ref));
        std::string snapshot = repo + "/snapshots/" + std::string(Trim(revision));
        if (env->IsDirectory(snapshot)) return FilesInDirectory(snapshot, env);
        looked.push_back(snapshot + " (named by " + ref + ", missing)");
      } else if (env->IsDirectory(repo + "/snapshots")) {
        // No refs/main: a single snapshot is unambiguous.
        AIR_ASSIGN_OR_RETURN(auto revisions, env->ListDir(repo + "/snapshots"));
        if (revisions.size() == 1) {
          return FilesInDirectory(repo + "/snapshots/" + revisions[0], env);
        }
        looked.push_back(ref + fmt::format(" (missing, and {} snapshots)", revisions.size()));
      } else {
        looked.push_back(repo + "/snapshots (not in the Hugging Face cache)");
      }
    }
  }
  return NotFound(fmt::format("dataset \"{}\" not found; looked at: {} (nothing is downloaded)",
                              dataset_name, Join(looked, "; ")));
}

Result<DatasetRecord> ParseRecord(const json& value, const std::string& where) {
  if (!value.is_object()) {
    return InvalidArgument(fmt::format(
        "{}: a record must be a JSON object (alpaca: instruction/input/output, or chat: "
        "messages), got {}",
        where, value.type_name()));
  }
  DatasetRecord record;
  record.source = where;
  if (value.contains("messages")) {
    record.kind = DatasetRecord::Kind::kChat;
    AIR_ASSIGN_OR_RETURN(record.messages, ParseChatMessages(value, where));
    bool has_assistant = std::any_of(record.messages.begin(), record.messages.end(),
                                     [](const ChatMessage& m) { return m.role == "assistant"; });
    if (!has_assistant) {
      return InvalidArgument(where +
                             ": field \"messages\" has no message with role "
                             "\"assistant\", so there is nothing to learn from this record");
    }
    return record;
  }
  if (!value.contains("instruction") && !value.contains("output")) {
    return InvalidArgument(fmt::format(
        "{}: the record is neither alpaca (\"instruction\", optional \"input\", \"output\") nor "
        "chat (\"messages\"); it has: {}",
        where, KeysOf(value)));
  }
  const char* alpaca = "alpaca records need \"instruction\" and \"output\" strings";
  AIR_ASSIGN_OR_RETURN(record.instruction, RequiredString(value, "instruction", where, alpaca));
  AIR_ASSIGN_OR_RETURN(record.output, RequiredString(value, "output", where, alpaca));
  if (value.contains("input") && !value["input"].is_null()) {
    if (!value["input"].is_string()) {
      return InvalidArgument(fmt::format("{}: field \"input\" must be a string, got {}", where,
                                         value["input"].type_name()));
    }
    record.input = value["input"].get<std::string>();
  }
  return record;
}

Result<std::vector<DatasetRecord>> ParseRecords(std::string_view content, const std::string& path) {
  std::vector<DatasetRecord> records;
  if (content.starts_with("\xEF\xBB\xBF")) content.remove_prefix(3);  // a UTF-8 byte order mark
  size_t first = content.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return records;
  if (content[first] == '[') {
    AIR_ASSIGN_OR_RETURN(json array, ParseJson(content, path));
    std::vector<size_t> offsets = ArrayElementOffsets(content);
    for (size_t i = 0; i < array.size(); ++i) {
      size_t line = i < offsets.size() ? LineColumnAt(content, offsets[i]).line : 1;
      AIR_ASSIGN_OR_RETURN(DatasetRecord r,
                           ParseRecord(array[i], fmt::format("{}:{}", path, line)));
      records.push_back(std::move(r));
    }
    return records;
  }
  size_t pos = 0, line_no = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    ++line_no;
    pos = end + 1;
    if (Trim(line).empty()) continue;
    std::string where = fmt::format("{}:{}", path, line_no);
    auto value = ParseJson(line, path, line_no - 1);
    if (!value.ok()) {
      // "FILE:LINE:COL: invalid JSON: ..." plus what a line should be and how this one starts.
      return InvalidArgument(fmt::format(
          "{} (a JSON-lines dataset holds one JSON object per line; this line starts: {})",
          value.status().message(), Excerpt(line)));
    }
    AIR_ASSIGN_OR_RETURN(DatasetRecord r, ParseRecord(*value, where));
    records.push_back(std::move(r));
  }
  return records;
}

Result<std::vector<DatasetRecord>> LoadRecords(const std::vector<std::string>& files, Env* env) {
  std::vector<DatasetRecord> records;
  for (const std::string& path : files) {
    AIR_ASSIGN_OR_RETURN(std::string content, env->ReadFile(path));
    AIR_ASSIGN_OR_RETURN(auto more, ParseRecords(content, path));
    records.insert(records.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
  }
  if (records.empty()) {
    return InvalidArgument(fmt::format(
        "empty dataset: {} {} no records (expected JSON lines or a JSON array of alpaca or chat "
        "records)",
        Join(files, ", "), files.size() == 1 ? "has" : "have"));
  }
  return records;
}

}  // namespace air::engine
