// JinjaValue: the values of the small Jinja interpreter that renders chat templates (jinja.h) —
// Python-like: undefined, none, bool, int, float, str, list, dict (insertion-ordered), and
// built-in functions. Lists and dicts are shared by reference, like Python objects, which is what
// `namespace()` objects mutated by `{% set ns.x = ... %}` need.
// Printing and tojson follow Python (str(), json.dumps(ensure_ascii=False)), so rendered text is
// what transformers' jinja2 produces.
// Thread safety: values are not synchronized; one render uses them from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace air::engine::jinja {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
};
using Function = std::function<Result<Value>(const CallArgs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Function> function;

  static Value Undefined() { return Value(); }
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value Str(std::string s);
  static Value MakeList(List items = {});
  static Value MakeDict(Dict items = {});
  static Value MakeFunction(Function f);
  static Value FromJson(const nlohmann::json& json);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }

  // Python truthiness (undefined is false).
  bool Truthy() const;
  // Python str() (undefined prints as "").
  std::string Str() const;
  // json.dumps(value, ensure_ascii=False, indent=indent) with Python's separators.
  Result<std::string> ToJson(std::optional<int> indent) const;
  // The dict entry `key` (nullptr when absent or not a dict).
  const Value* Find(std::string_view key) const;
  Value* FindMutable(std::string_view key);
  void Set(const std::string& key, Value value);  // dicts only
  double AsDouble() const { return kind == Kind::kInt ? static_cast<double>(integer) : real; }
  // "str", "int", "list", ... for error messages.
  const char* TypeName() const;
};

// Python ==.
bool Equal(const Value& a, const Value& b);

}  // namespace air::engine::jinja
