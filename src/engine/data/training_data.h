// OpenTrainingData: the data pipeline in one call, for the trainer —
//   dataset_name -> files (dataset.h) -> records -> labelled examples (examples.h)
//   -> DataLoader batches for this rank (data_loader.h).
// max_seq_len bounds both the examples and the rows (packing: rows of exactly max_seq_len).
// Thread safety: a free function; the result is owned by the caller (one consumer).
#pragma once

#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/data/data_loader.h"
#include "engine/data/examples.h"
#include "engine/data/tokenizer.h"

namespace air::engine {

struct TrainingDataOptions {
  std::string dataset_name;
  int max_seq_len = 2048;
  bool train_on_prompt = false;
  DataLoaderOptions loader;  // its seq_len is set from max_seq_len
};

struct TrainingData {
  DataLoader loader;
  ExampleStats examples;
  std::vector<std::string> files;
};

Result<TrainingData> OpenTrainingData(const Tokenizer& tokenizer,
                                      const TrainingDataOptions& options, Env* env);

}  // namespace air::engine
