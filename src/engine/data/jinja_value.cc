// Jinja values: construction, Python truthiness/str/==, and json.dumps (see jinja_value.h).
#include "engine/data/jinja_value.h"

#include <fmt/format.h>

#include <cmath>

namespace air::engine::jinja {
namespace {

// Python's repr() of a float: the shortest text that reads back, with ".0" for whole numbers.
std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// Python's repr() of a str.
std::string StrRepr(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string Repr(const Value& v) { return v.is_string() ? StrRepr(v.text) : v.Str(); }

void JsonString(const std::string& s, std::string* out) {
  *out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          *out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

Status JsonInto(const Value& v, std::optional<int> indent, int depth, std::string* out) {
  auto newline = [&](int d) {
    if (indent) *out += "\n" + std::string(static_cast<size_t>(*indent * d), ' ');
  };
  const char* item_sep = indent ? "," : ", ";
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      *out += "null";
      return Status::Ok();
    case Value::Kind::kBool:
      *out += v.boolean ? "true" : "false";
      return Status::Ok();
    case Value::Kind::kInt:
      *out += std::to_string(v.integer);
      return Status::Ok();
    case Value::Kind::kFloat:
      *out += std::isnan(v.real)   ? "NaN"
              : std::isinf(v.real) ? (v.real > 0 ? "Infinity" : "-Infinity")
                                   : FloatRepr(v.real);
      return Status::Ok();
    case Value::Kind::kString:
      JsonString(v.text, out);
      return Status::Ok();
    case Value::Kind::kList:
      *out += '[';
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        AIR_RETURN_IF_ERROR(JsonInto((*v.list)[i], indent, depth + 1, out));
      }
      if (!v.list->empty()) newline(depth);
      *out += ']';
      return Status::Ok();
    case Value::Kind::kDict:
      *out += '{';
      for (size_t i = 0; i < v.dict->size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        JsonString((*v.dict)[i].first, out);
        *out += ": ";
        AIR_RETURN_IF_ERROR(JsonInto((*v.dict)[i].second, indent, depth + 1, out));
      }
      if (!v.dict->empty()) newline(depth);
      *out += '}';
      return Status::Ok();
    case Value::Kind::kFunction:
      return InvalidArgument("tojson: a function is not JSON");
  }
  return Status::Ok();
}

}  // namespace

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::None() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.integer = i;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind = Kind::kFloat;
  v.real = d;
  return v;
}
Value Value::Str(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.text = std::move(s);
  return v;
}
Value Value::MakeList(List items) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::MakeDict(Dict items) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>(std::move(items));
  return v;
}
Value Value::MakeFunction(Function f) {
  Value v;
  v.kind = Kind::kFunction;
  v.function = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::FromJson(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return None();
    case nlohmann::json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return Int(j.get<int64_t>());
    case nlohmann::json::value_t::number_float:
      return Float(j.get<double>());
    case nlohmann::json::value_t::string:
      return Str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(FromJson(e));
      return MakeList(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict items;
      for (const auto& [k, e] : j.items()) items.emplace_back(k, FromJson(e));
      return MakeDict(std::move(items));
    }
    default:
      return None();
  }
}

bool Value::Truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return boolean;
    case Kind::kInt:
      return integer != 0;
    case Kind::kFloat:
      return real != 0;
    case Kind::kString:
      return !text.empty();
    case Kind::kList:
      return !list->empty();
    case Kind::kDict:
      return !dict->empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::Str() const {
  switch (kind) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return boolean ? "True" : "False";
    case Kind::kInt:
      return std::to_string(integer);
    case Kind::kFloat:
      return FloatRepr(real);
    case Kind::kString:
      return text;
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list->size(); ++i) out += (i ? ", " : "") + Repr((*list)[i]);
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < dict->size(); ++i) {
        out += (i ? ", " : "") + StrRepr((*dict)[i].first) + ": " + Repr((*dict)[i].second);
      }
      return out + "}";
    }
    case Kind::kFunction:
      return "<function>";
  }
  return "";
}

Result<std::string> Value::ToJson(std::optional<int> indent) const {
  std::string out;
  AIR_RETURN_IF_ERROR(JsonInto(*this, indent, 0, &out));
  return out;
}

const Value* Value::Find(std::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : *dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Value::FindMutable(std::string_view key) {
  return const_cast<Value*>(static_cast<const Value*>(this)->Find(key));
}

void Value::Set(const std::string& key, Value value) {
  if (Value* existing = FindMutable(key)) {
    *existing = std::move(value);
  } else if (kind == Kind::kDict) {
    dict->emplace_back(key, std::move(value));
  }
}

const char* Value::TypeName() const {
  switch (kind) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.AsDouble() == b.AsDouble();
  if (a.kind == Value::Kind::kBool && b.is_number()) return (a.boolean ? 1.0 : 0.0) == b.AsDouble();
  if (b.kind == Value::Kind::kBool && a.is_number()) return Equal(b, a);
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return a.boolean == b.boolean;
    case Value::Kind::kString:
      return a.text == b.text;
    case Value::Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i) {
        if (!Equal((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    default:
      return a.function == b.function;
  }
}

}  // namespace air::engine::jinja
