// Reading pre-tokenized JSONL datasets (see pretokenized_dataset.h).
#include "engine/train/pretokenized_dataset.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace air::engine::train {
namespace {

Status ReadIdList(const nlohmann::json& record, const char* field, const std::string& where,
                  int64_t vocab_size, bool allow_ignore, std::vector<int32_t>& out) {
  const auto& value = record[field];
  if (!value.is_array()) {
    return InvalidArgument(fmt::format("{}: {}: expected a list of token ids, got {}", where, field,
                                       value.type_name()));
  }
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const auto& id = value[i];
    if (!id.is_number_integer()) {
      return InvalidArgument(fmt::format("{}: {}[{}]: expected an integer token id, got {}", where,
                                         field, i, id.dump()));
    }
    int64_t v = id.get<int64_t>();
    bool ok = (v >= 0 && v < vocab_size) || (allow_ignore && v == kIgnoreIndex);
    if (!ok) {
      return InvalidArgument(
          fmt::format("{}: {}[{}]: token id {} is outside the model's "
                      "vocabulary [0, {}){}",
                      where, field, i, v, vocab_size, allow_ignore ? " (or -100 to mask)" : ""));
    }
    out.push_back(static_cast<int32_t>(v));
  }
  return Status::Ok();
}

}  // namespace

bool LooksPretokenized(Env* env, const std::string& path) {
  if (!EndsWith(path, ".jsonl") || env->IsDirectory(path)) return false;
  auto text = env->ReadFile(path);
  if (!text.ok()) return false;
  for (const std::string& line : Split(*text, '\n')) {
    if (Trim(line).empty()) continue;
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    return record.is_object() && record.contains("input_ids");
  }
  return false;
}

Result<std::vector<TokenizedExample>> ReadPretokenizedJsonl(Env* env, const std::string& path,
                                                            int64_t vocab_size) {
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  std::vector<TokenizedExample> examples;
  std::vector<std::string> lines = Split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty()) continue;
    const std::string where = fmt::format("{}:{}", path, i + 1);
    auto record = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) {
      return InvalidArgument(
          fmt::format("{}: not a JSON object (a pre-tokenized dataset has one "
                      "{{\"input_ids\": [...], \"labels\": [...]}} per line)",
                      where));
    }
    if (!record.is_object() || !record.contains("input_ids")) {
      return InvalidArgument(
          fmt::format("{}: input_ids: missing (each line needs "
                      "{{\"input_ids\": [...]}} and optionally \"labels\")",
                      where));
    }
    TokenizedExample ex;
    ex.source = where;
    AIR_RETURN_IF_ERROR(ReadIdList(record, "input_ids", where, vocab_size, false, ex.input_ids));
    if (ex.input_ids.size() < 2) {
      return InvalidArgument(
          fmt::format("{}: input_ids: needs at least 2 tokens to predict one", where));
    }
    if (record.contains("labels")) {
      AIR_RETURN_IF_ERROR(ReadIdList(record, "labels", where, vocab_size, true, ex.labels));
      if (ex.labels.size() != ex.input_ids.size()) {
        return InvalidArgument(
            fmt::format("{}: labels: has {} ids but input_ids has {}; they "
                        "must be the same length",
                        where, ex.labels.size(), ex.input_ids.size()));
      }
    } else {
      ex.labels = ex.input_ids;
    }
    examples.push_back(std::move(ex));
  }
  if (examples.empty()) {
    return InvalidArgument(fmt::format("{}: the dataset is empty (no lines with input_ids)", path));
  }
  return examples;
}

}  // namespace air::engine::train
