// String helpers and the methods of str and dict values for the Jinja interpreter (what chat
// templates call: strip, split, startswith, replace, items, get, ...), with Python semantics on
// code points. Internal to src/engine/data.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/data/jinja_value.h"

namespace air::engine::jinja {

std::vector<std::string> CodePoints(const std::string& s);
// str.strip/lstrip/rstrip: Python white space, or the code points of `chars` when given.
std::string Strip(const std::string& s, const Value* chars, bool left, bool right);
std::string MapAscii(std::string s, int (*fn)(int));
std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count);
std::string HtmlEscape(const std::string& s);
// Argument `index`, or keyword `name`; nullptr when absent.
const Value* Arg(const CallArgs& args, size_t index, std::string_view name);
int64_t IntArg(const CallArgs& args, size_t index, std::string_view name, int64_t fallback);
// len(): code points of a str, items of a list or dict.
Result<Value> Length(const Value& v);
// The method `name` of a str or dict, bound to `self`.
Value Method(Value self, std::string name);
bool IsStrMethod(const std::string& name);
Status UndefinedError(const std::string& what);

}  // namespace air::engine::jinja
