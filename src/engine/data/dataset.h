// Datasets: finding a dataset's files from its `dataset_name` and reading its records.
//
// dataset_name may be
//   - a file: JSON lines (one object per line) or one JSON array of objects, told apart by the
//     first non-blank character ('[' -> array);
//   - a directory holding train.jsonl / train.json (or data/train.jsonl / data/train.json, or
//     data/train-*.jsonl / data/train-*.json shards, as hub snapshots lay them out);
//   - a hub dataset id ORG/NAME, found in the Hugging Face cache at
//     $HF_HUB_CACHE | $HF_HOME/hub | ~/.cache/huggingface/hub, datasets--ORG--NAME/snapshots/
//     <the revision in refs/main>, then read as a directory. Nothing is downloaded; when absent,
//     the error lists every place that was looked at.
// Records are alpaca ({"instruction", "input" (optional), "output"}, strings) or chat
// ({"messages": [{"role", "content"}, ...]}). Every bad record is an error naming FILE:LINE,
// the field and what is expected; a dataset without records is an error too.
// Thread safety: free functions; files are read through the given Env.
#pragma once

#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/data/chat_template.h"

namespace air::engine {

struct DatasetRecord {
  enum class Kind { kInstruction, kChat };
  Kind kind = Kind::kInstruction;
  std::string instruction;            // kInstruction
  std::string input;                  // kInstruction; "" when absent
  std::string output;                 // kInstruction
  std::vector<ChatMessage> messages;  // kChat
  std::string source;                 // "FILE:LINE", for messages about this record
};

// The data files `dataset_name` stands for (see above), in reading order.
Result<std::vector<std::string>> ResolveDataset(const std::string& dataset_name, Env* env);

// Every record of every file, in order.
Result<std::vector<DatasetRecord>> LoadRecords(const std::vector<std::string>& files, Env* env);

// The records of one file's contents (`path` is used in messages only).
Result<std::vector<DatasetRecord>> ParseRecords(std::string_view content, const std::string& path);

// One record from its JSON object; `where` is "FILE:LINE".
Result<DatasetRecord> ParseRecord(const nlohmann::json& value, const std::string& where);

}  // namespace air::engine
