// The pieces `air train`'s parameter table is built from (train_config.cc, and
// train_config_lora.cc for the LoRA keys): a given YAML value with its location, the error list
// every key reports into, readers of YAML scalars, and setters for plain typed fields with a
// range. Internal to engine/train's config parsing.
// Thread safety: plain functions and values.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/train/train_config.h"
#include "spec/yaml_tree.h"

namespace air::engine::train::fields {

using spec::YamlNode;

// One given value: the YAML node and where it came from.
struct GivenValue {
  YamlNode node;
  std::string where;  // "file:line:col" or "--set key=value"
};

class ErrorList {
 public:
  void Add(const std::string& where, const std::string& field, const std::string& message);
  bool empty() const { return lines_.empty(); }
  size_t size() const { return lines_.size(); }
  Status ToStatus() const;

 private:
  std::vector<std::string> lines_;
};

// The source of a "file:line:col" location ("file"), for locations of nested keys.
std::string SourceOf(const std::string& where);
// "a list", "a map", "nothing (null)", "'text'" or "the quoted string \"text\"".
std::string Describe(const YamlNode& node);
bool IsPlainScalar(const YamlNode& node);
// A scalar that is not null: its text.
bool IsText(const YamlNode& node);
std::optional<int64_t> ReadInt(const YamlNode& node);
std::optional<double> ReadFloat(const YamlNode& node);
std::optional<bool> ReadBool(const YamlNode& node);

using Setter = std::function<void(const GivenValue&, TrainConfig&, ErrorList&)>;

struct FieldSpec {
  std::string name;
  std::string alias;  // another accepted spelling, or ""
  bool required = false;
  Setter set;
};

// Range checks are written as (min, max, inclusive?) on doubles; ints use the same code.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_inclusive = true;
  bool max_inclusive = true;
  std::string text;  // what would be valid, in words
};
bool InRange(double v, const Range& r);

// Setters of a TrainConfig member (through `field`, which returns a reference to it) from a
// plain scalar of the type, with the range checked; errors name `name`.
Setter IntField(const std::string& name, std::function<int&(TrainConfig&)> field, Range range,
                std::function<bool(int64_t)> extra_ok = nullptr);
Setter Int64Field(const std::string& name, std::function<int64_t&(TrainConfig&)> field);
Setter FloatField(const std::string& name, std::function<double&(TrainConfig&)> field, Range range);
Setter BoolField(const std::string& name, std::function<bool&(TrainConfig&)> field);
Setter StringField(const std::string& name, std::function<std::string&(TrainConfig&)> field);

// The same for a direct member (`&TrainConfig::learning_rate`).
template <typename T>
std::function<T&(TrainConfig&)> Member(T TrainConfig::*member) {
  return [member](TrainConfig& c) -> T& { return c.*member; };
}

// The LoRA keys (train_config_lora.cc): TRL's use_peft, lora_r, lora_alpha, lora_dropout,
// lora_target_modules, use_rslora, lora_modules_to_save, lora_task_type, and lora_adapter_path.
std::vector<FieldSpec> LoraFieldSpecs();
// Checks between them once every key is read (LoRA keys without use_peft, ...).
void CheckLoraFields(const std::map<std::string, GivenValue>& given, TrainConfig& config,
                     ErrorList& errors);

}  // namespace air::engine::train::fields
