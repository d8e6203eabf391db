// Model checkpoints in the Hugging Face layout: a directory with config.json, weights in
// model.safetensors or sharded as model-0000i-of-0000n.safetensors plus
// model.safetensors.index.json ({"metadata": {"total_size": N}, "weight_map": {name: file}}),
// generation_config.json, and the tokenizer files.
//
// WeightReader opens either form and finds each tensor in whichever shard holds it (the index
// is validated: every shard it names exists and holds the tensors it claims). SaveHfCheckpoint
// writes the form a max shard size calls for, every file atomically; transformers'
// from_pretrained loads the result.
// Thread safety: WeightReader is immutable after Open; functions are independent.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/safetensors.h"
#include "engine/model/model_config.h"

namespace air::engine {

inline constexpr const char* kSafetensorsSingleName = "model.safetensors";
inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

class WeightReader {
 public:
  // Opens DIR/model.safetensors, or DIR/model.safetensors.index.json and its shards. When
  // neither exists: NotFound naming both paths.
  static Result<std::unique_ptr<WeightReader>> Open(const std::string& model_dir);

  // The file and entry holding `name`, or nullptr.
  const SafetensorsEntry* Find(const std::string& name, const SafetensorsFile** file) const;
  // Every tensor name, sorted.
  std::vector<std::string> Names() const;
  // Reads `name` into `out` (shape must match; the error names the tensor, file, expected and
  // actual shape). NotFound names the tensor and the files searched.
  Status ReadInto(const std::string& name, Tensor& out) const;
  const std::string& dir() const { return dir_; }
  // The files opened, for error messages ("model.safetensors" or the shard names).
  std::string FileList() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> owner_;  // tensor name -> index into files_
};

struct SaveOptions {
  DType dtype = DType::kF32;
  // Shards are started when the next tensor would exceed this many data bytes; 0 = one file.
  // A single tensor larger than the limit gets a shard of its own.
  uint64_t max_shard_bytes = 0;
};

// Writes DIR/config.json, the weights (single file or shards + index) and
// DIR/generation_config.json. Creates DIR. Stale weight files of the other form left in DIR from
// an earlier save are removed after the new ones are in place, so loaders never see both.
Status SaveHfCheckpoint(const std::string& dir, const ModelConfig& config,
                        const std::vector<NamedTensorRef>& tensors, const SaveOptions& options,
                        Env* env = DefaultEnv());

// The tokenizer files a checkpoint carries (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json, tokenizer.model, vocab.json, merges.txt, chat_template.jinja,
// added_tokens.json): copies those present in `from_dir` to `to_dir` (atomically each) and
// returns the names copied. The trainer calls this with the base model's directory.
Result<std::vector<std::string>> CopyTokenizerFiles(const std::string& from_dir,
                                                    const std::string& to_dir,
                                                    Env* env = DefaultEnv());

}  // namespace air::engine
