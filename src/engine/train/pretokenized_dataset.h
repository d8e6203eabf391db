// Pre-tokenized datasets: a JSONL file with one sequence per line,
//   {"input_ids": [1, 15, 27, ...], "labels": [-100, -100, 27, ...]}
// labels is optional (default: a copy of input_ids, i.e. loss on every token) and, when given,
// has the same length; -100 masks a position. This is the format parity tests use to feed air
// and PyTorch the very same tokens, and a way to train on data tokenized elsewhere. The examples
// are engine/data's TokenizedExample, so they batch like tokenized text datasets.
// Thread safety: free functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/data/examples.h"

namespace air::engine::train {

// True when `path` is a .jsonl file whose first non-blank line is an object with "input_ids".
bool LooksPretokenized(Env* env, const std::string& path);

// Reads every line; errors name the file, the line and the field ("data.jsonl:7: labels: ...").
// Ids must lie in [0, vocab_size) (labels may also be -100). An empty file is an error.
Result<std::vector<TokenizedExample>> ReadPretokenizedJsonl(Env* env, const std::string& path,
                                                            int64_t vocab_size);

}  // namespace air::engine::train
