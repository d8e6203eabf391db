// JsonFields: typed reads of a config.json object's fields, each error naming the source (the
// file, plus the sub-object, e.g. "config.json (rope_scaling)") and the field, what was expected
// and what was found. Absent and null fields take the given fallback, or are an error when the
// field is required (no fallback).
//
// Both config readers use it (hf_config.cc for the Llama family, gpt_oss_hf_config.cc), and
// share what every HF causal-LM config.json has: reading its file (ReadModelConfigText), its
// common fields (ReadCommonHfFields) and writing its sizes and token ids (WriteCommonHfSizes,
// WriteTokenIds).
// Thread safety: a view of `obj` and `source`, which must outlive it; reads are const.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace air::engine {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& obj, const std::string& source) : obj_(obj), source_(source) {}

  // An integer (or a float with an integral value).
  Status Int(const char* field, int64_t* out, std::optional<int64_t> fallback) const;
  Status Double(const char* field, double* out, std::optional<double> fallback) const;
  Status Bool(const char* field, bool* out, std::optional<bool> fallback) const;
  Status String(const char* field, std::string* out, std::optional<std::string> fallback) const;
  // An int, a list of ints, or absent/null (-> empty).
  Status IntList(const char* field, std::vector<int64_t>* out) const;
  // A list of strings, or absent/null (-> empty).
  Status StringList(const char* field, std::vector<std::string>* out) const;

  // The field's value, or nullptr when absent or null.
  const nlohmann::json* Get(const char* field) const;
  bool Has(const char* field) const { return Get(field) != nullptr; }

  Status Missing(const std::string& field, const std::string& what) const;
  Status WrongType(const std::string& field, const std::string& what,
                   const nlohmann::json& value) const;
  // "SOURCE: field 'FIELD' " + message.
  Status Invalid(const std::string& field, const std::string& message) const;

  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& obj_;
  const std::string& source_;
};

// Reads the fields every HF causal-LM config.json carries, the same way for every model type:
// vocab_size (required when `vocab_size_default` is nullopt), tie_word_embeddings (false),
// initializer_range (0.02), bos_token_id and pad_token_id (-1 when absent or null), eos_token_id
// (one id or a list) and the weights' dtype ("dtype", or "torch_dtype" in files transformers 4
// wrote; "float32" when neither is there) into the config's fields of those names.
template <typename Config>
Status ReadCommonHfFields(const JsonFields& r, std::optional<int64_t> vocab_size_default,
                          Config& c) {
  AIR_RETURN_IF_ERROR(r.Int("vocab_size", &c.vocab_size, vocab_size_default));
  AIR_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c.tie_word_embeddings, false));
  AIR_RETURN_IF_ERROR(r.Double("initializer_range", &c.initializer_range, 0.02));
  AIR_RETURN_IF_ERROR(r.Int("bos_token_id", &c.bos_token_id, -1));
  AIR_RETURN_IF_ERROR(r.IntList("eos_token_id", &c.eos_token_ids));
  AIR_RETURN_IF_ERROR(r.Int("pad_token_id", &c.pad_token_id, -1));
  std::string dtype;
  AIR_RETURN_IF_ERROR(r.String("dtype", &dtype, ""));
  if (dtype.empty()) AIR_RETURN_IF_ERROR(r.String("torch_dtype", &dtype, "float32"));
  c.torch_dtype = dtype;
  return Status::Ok();
}

// Writes the sizes every HF causal-LM config.json carries, from the config's fields of these
// meanings: vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, head_dim (in that order).
template <typename Config>
void WriteCommonHfSizes(nlohmann::ordered_json& j, const Config& c) {
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
}

// The text of MODEL_DIR/config.json (read through DefaultEnv()) and its path; the error names
// the file.
struct ConfigText {
  std::string path;
  std::string text;
};
Result<ConfigText> ReadModelConfigText(const std::string& model_dir);

// Writes bos_token_id, eos_token_id (one id, a list, or null) and pad_token_id (-1: null) as
// transformers writes them in config.json.
void WriteTokenIds(nlohmann::ordered_json& config, int64_t bos, const std::vector<int64_t>& eos,
                   int64_t pad);

}  // namespace air::engine
