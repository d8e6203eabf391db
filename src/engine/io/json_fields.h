// JsonFields: typed reads of a config.json object's fields, each error naming the source (the
// file, plus the sub-object, e.g. "config.json (rope_scaling)") and the field, what was expected
// and what was found. Absent and null fields take the given fallback, or are an error when the
// field is required (no fallback).
//
// The GPT-OSS config reader uses it; hf_config.cc (the Llama family) still has its own copy of
// the same class in an anonymous namespace, to be replaced by this one when that file changes.
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

// Writes bos_token_id, eos_token_id (one id, a list, or null) and pad_token_id (-1: null) as
// transformers writes them in config.json.
void WriteTokenIds(nlohmann::ordered_json& config, int64_t bos, const std::vector<int64_t>& eos,
                   int64_t pad);

}  // namespace air::engine
