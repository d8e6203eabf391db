// Built-ins of the Jinja interpreter: filters (trim, length, tojson, ...), tests (defined, none,
// string, ...), Python operators on values, attribute access with the str/dict methods chat
// templates call, and the globals transformers adds (raise_exception, strftime_now, namespace,
// dict, range). Internal to src/engine/data.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/data/jinja_value.h"

namespace air::engine::jinja {

Result<Value> ApplyFilter(const std::string& name, const Value& value, const CallArgs& args);
Result<bool> ApplyTest(const std::string& name, const Value& value, const CallArgs& args);
// Python binary operators: + - * / // % ~ == != < <= > >= in, "not in".
Result<Value> BinaryOp(const std::string& op, const Value& a, const Value& b);
// jinja2's getattr: a dict key, a str/dict method (bound), or undefined.
Result<Value> GetAttribute(const Value& object, const std::string& name);
// obj[key]: list index (negative from the end), dict key, str code point; undefined if absent.
Result<Value> GetItem(const Value& object, const Value& key);
// obj[start:stop:step] on lists and strings (code points), Python semantics.
Result<Value> Slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items iterated by a for loop: list items, dict keys, str code points.
Result<List> Iterate(const Value& value);
// The global functions available to every template.
Dict Globals();

}  // namespace air::engine::jinja
