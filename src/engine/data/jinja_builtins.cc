// Jinja built-ins: iteration, attributes and items, slices, operators, globals (see
// jinja_builtins.h; filters and tests are in jinja_filters.cc).
#include "engine/data/jinja_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "engine/data/jinja_methods.h"
#include "engine/data/utf8.h"

namespace air::engine::jinja {

Result<List> Iterate(const Value& v) {
  if (v.is_list()) return *v.list;
  if (v.is_dict()) {
    List keys;
    for (const auto& [k, e] : *v.dict) keys.push_back(Value::Str(k));
    return keys;
  }
  if (v.is_string()) {
    List chars;
    for (auto& cp : CodePoints(v.text)) chars.push_back(Value::Str(cp));
    return chars;
  }
  if (v.is_undefined()) return List{};
  return InvalidArgument(fmt::format("'{}' object is not iterable", v.TypeName()));
}

Result<Value> GetAttribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) return UndefinedError("attribute '" + name + "'");
  if (object.is_dict()) {
    if (name == "items" || name == "keys" || name == "values" || name == "get") {
      return Method(object, name);
    }
    const Value* found = object.Find(name);
    return found != nullptr ? *found : Value::Undefined();
  }
  if (object.is_string() && IsStrMethod(name)) return Method(object, name);
  return Value::Undefined();
}

Result<Value> GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return UndefinedError("subscript");
  if (object.is_dict()) {
    if (const Value* found = object.Find(key.Str()); found != nullptr && key.is_string()) {
      return *found;
    }
    return key.is_string() ? GetAttribute(object, key.text) : Value::Undefined();
  }
  if ((object.is_list() || object.is_string()) && key.kind == Value::Kind::kInt) {
    List items;
    AIR_ASSIGN_OR_RETURN(items, Iterate(object));
    int64_t i = key.integer < 0 ? key.integer + static_cast<int64_t>(items.size()) : key.integer;
    if (i < 0 || i >= static_cast<int64_t>(items.size())) return Value::Undefined();
    return items[i];
  }
  if (object.is_string() && key.is_string()) return GetAttribute(object, key.text);
  return Value::Undefined();
}

Result<Value> Slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  AIR_ASSIGN_OR_RETURN(List items, Iterate(object));
  auto n = static_cast<int64_t>(items.size());
  int64_t st = step.kind == Value::Kind::kInt ? step.integer : 1;
  if (st == 0) return InvalidArgument("slice step cannot be zero");
  auto bound = [&](const Value& v, int64_t fallback) {
    if (v.kind != Value::Kind::kInt) return fallback;
    int64_t i = v.integer < 0 ? v.integer + n : v.integer;
    return st > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t b = bound(start, st > 0 ? 0 : n - 1), e = bound(stop, st > 0 ? n : -1);
  List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(items[i]);
  if (!object.is_string()) return Value::MakeList(std::move(out));
  std::string s;
  for (const auto& v : out) s += v.text;
  return Value::Str(s);
}

Result<Value> BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value::Bool(Equal(a, b));
  if (op == "!=") return Value::Bool(!Equal(a, b));
  if (op == "~") return Value::Str(a.Str() + b.Str());
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) return InvalidArgument("'in <string>' requires a string on the left");
      found = b.text.find(a.text) != std::string::npos;
    } else if (b.is_dict()) {
      found = b.Find(a.Str()) != nullptr && a.is_string();
    } else {
      AIR_ASSIGN_OR_RETURN(List items, Iterate(b));
      found = std::any_of(items.begin(), items.end(), [&](const Value& v) { return Equal(a, v); });
    }
    return Value::Bool(op == "in" ? found : !found);
  }
  if (a.is_undefined() || b.is_undefined()) return UndefinedError("operator " + op);
  bool ints = a.kind == Value::Kind::kInt && b.kind == Value::Kind::kInt;
  if (a.is_number() && b.is_number()) {
    double x = a.AsDouble(), y = b.AsDouble();
    if (op == "+") return ints ? Value::Int(a.integer + b.integer) : Value::Float(x + y);
    if (op == "-") return ints ? Value::Int(a.integer - b.integer) : Value::Float(x - y);
    if (op == "*") return ints ? Value::Int(a.integer * b.integer) : Value::Float(x * y);
    if (op == "<") return Value::Bool(x < y);
    if (op == "<=") return Value::Bool(x <= y);
    if (op == ">") return Value::Bool(x > y);
    if (op == ">=") return Value::Bool(x >= y);
    if (y == 0 && (op == "/" || op == "//" || op == "%"))
      return InvalidArgument("division by zero");
    if (op == "/") return Value::Float(x / y);
    if (op == "//") {
      return ints ? Value::Int(static_cast<int64_t>(std::floor(x / y)))
                  : Value::Float(std::floor(x / y));
    }
    if (op == "%") {
      if (ints) return Value::Int(((a.integer % b.integer) + b.integer) % b.integer);
      return Value::Float(x - y * std::floor(x / y));
    }
  }
  if (a.is_string() && b.is_string()) {
    if (op == "+") return Value::Str(a.text + b.text);
    if (op == "<") return Value::Bool(a.text < b.text);
    if (op == "<=") return Value::Bool(a.text <= b.text);
    if (op == ">") return Value::Bool(a.text > b.text);
    if (op == ">=") return Value::Bool(a.text >= b.text);
  }
  if (a.is_list() && b.is_list() && op == "+") {
    List out = *a.list;
    out.insert(out.end(), b.list->begin(), b.list->end());
    return Value::MakeList(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.kind == Value::Kind::kInt) {
    if (a.is_string()) {
      std::string out;
      for (int64_t i = 0; i < b.integer; ++i) out += a.text;
      return Value::Str(out);
    }
    List out;
    for (int64_t i = 0; i < b.integer; ++i) out.insert(out.end(), a.list->begin(), a.list->end());
    return Value::MakeList(std::move(out));
  }
  return InvalidArgument(fmt::format("unsupported operand types for {}: '{}' and '{}'", op,
                                     a.TypeName(), b.TypeName()));
}

Dict Globals() {
  Dict g;
  g.emplace_back(
      "raise_exception", Value::MakeFunction([](const CallArgs& a) -> Result<Value> {
        return FailedPrecondition(a.positional.empty() ? "raise_exception" : a.positional[0].Str());
      }));
  g.emplace_back("strftime_now", Value::MakeFunction([](const CallArgs& a) -> Result<Value> {
                   std::time_t now = std::time(nullptr);
                   std::tm local;
                   localtime_r(&now, &local);
                   char buf[256];
                   std::string format = a.positional.empty() ? "%Y-%m-%d" : a.positional[0].Str();
                   size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &local);
                   return Value::Str(std::string(buf, n));
                 }));
  auto make_dict = [](const CallArgs& a) -> Result<Value> {
    Value d = Value::MakeDict();
    if (!a.positional.empty() && a.positional[0].is_dict()) *d.dict = *a.positional[0].dict;
    for (const auto& [k, v] : a.keyword) d.Set(k, v);
    return d;
  };
  g.emplace_back("namespace", Value::MakeFunction(make_dict));
  g.emplace_back("dict", Value::MakeFunction(make_dict));
  g.emplace_back("range", Value::MakeFunction([](const CallArgs& a) -> Result<Value> {
                   int64_t start = 0, stop = 0, step = 1;
                   if (a.positional.size() == 1) stop = a.positional[0].integer;
                   if (a.positional.size() >= 2) {
                     start = a.positional[0].integer;
                     stop = a.positional[1].integer;
                   }
                   if (a.positional.size() >= 3) step = a.positional[2].integer;
                   if (step == 0) return InvalidArgument("range() step must not be zero");
                   // transformers renders templates in jinja2's sandbox, which refuses
                   // ranges longer than its MAX_RANGE (100000) the same way.
                   const double length =
                       std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                                 static_cast<double>(step));
                   if (length > 100000) {
                     return InvalidArgument(fmt::format(
                         "range() of {} items is too big (at most 100000, as in jinja2's "
                         "sandbox)",
                         length));
                   }
                   List out;
                   for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                     out.push_back(Value::Int(i));
                   }
                   return Value::MakeList(std::move(out));
                 }));
  return g;
}

}  // namespace air::engine::jinja
