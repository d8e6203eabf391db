// Reading and writing Hugging Face config.json files for the Llama family (REFERENCES.md §3).
//
// ParseModelConfig accepts what transformers writes (4.x and 5.x): rope_theta + rope_scaling or
// the newer rope_parameters, head_dim (optional), tie_word_embeddings, attention_bias, mlp_bias,
// sliding_window with use_sliding_window / max_window_layers / layer_types (Qwen2/3), and token
// ids. It rejects what air cannot run — another architecture (the error names it and lists the
// supported ones), a rope type other than default/llama3, an activation other than silu — and
// inconsistent sizes, each error naming the file and the field. ModelConfigToJson writes a
// config.json transformers loads back into the same model.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"

namespace air::engine {

// `json` is the parsed config; `source` names it in errors (usually the file path).
Result<ModelConfig> ModelConfigFromJson(const nlohmann::json& json, const std::string& source);
// Parses config.json text.
Result<ModelConfig> ParseModelConfig(const std::string& text, const std::string& source);
// Reads DIR/config.json.
Result<ModelConfig> LoadModelConfig(const std::string& model_dir);

// The config.json object for `config` (architectures, model_type, sizes, rope_parameters and
// rope_theta, ...); weights dtype written as `dtype` ("float32" or "bfloat16").
nlohmann::ordered_json ModelConfigToJson(const ModelConfig& config, const std::string& dtype);
// generation_config.json: bos/eos/pad ids when known.
nlohmann::ordered_json GenerationConfigJson(const ModelConfig& config);

// The config.json fields air reads (for did-you-mean on misspelled keys in hand-written
// configs; real config.json files carry many more, which are ignored).
const std::vector<std::string>& KnownConfigFields();

}  // namespace air::engine
