// The data pipeline in one call (see training_data.h).
#include "engine/data/training_data.h"

#include "engine/data/dataset.h"

namespace air::engine {

Result<TrainingData> OpenTrainingData(const Tokenizer& tokenizer,
                                      const TrainingDataOptions& options, Env* env) {
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> files, ResolveDataset(options.dataset_name, env));
  AIR_ASSIGN_OR_RETURN(std::vector<DatasetRecord> records, LoadRecords(files, env));
  ExampleOptions example_options;
  example_options.max_seq_len = options.max_seq_len;
  example_options.train_on_prompt = options.train_on_prompt;
  AIR_ASSIGN_OR_RETURN(BuiltExamples built, BuildExamples(records, tokenizer, example_options));
  DataLoaderOptions loader_options = options.loader;
  loader_options.seq_len = options.max_seq_len;
  ExampleStats stats = built.stats;
  AIR_ASSIGN_OR_RETURN(
      DataLoader loader,
      DataLoader::Create(std::move(built.examples), tokenizer.padding_id(), loader_options));
  return TrainingData{std::move(loader), stats, std::move(files)};
}

}  // namespace air::engine
