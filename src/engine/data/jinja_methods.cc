// String helpers and str/dict methods of the Jinja interpreter (see jinja_methods.h).
#include "engine/data/jinja_methods.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "engine/data/jinja_builtins.h"
#include "engine/data/utf8.h"

namespace air::engine::jinja {
namespace {

std::string Title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    bool alpha = std::isalpha(static_cast<unsigned char>(c));
    c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
    start = !alpha;
  }
  return out;
}

Value Split(const std::string& s, const Value* sep, int64_t maxsplit) {
  List parts;
  if (sep == nullptr || sep->is_none()) {  // runs of white space, no empty parts
    std::string word;
    int64_t splits = 0;
    std::vector<std::string> cps = CodePoints(s);
    for (size_t i = 0; i < cps.size(); ++i) {
      size_t len = 0;
      bool space = IsPythonWhiteSpace(DecodeUtf8At(cps[i], 0, &len));
      if (space && (maxsplit < 0 || splits < maxsplit)) {
        if (!word.empty()) {
          parts.push_back(Value::Str(word));
          word.clear();
          ++splits;
        }
      } else if (!space || !word.empty()) {
        word += cps[i];
      }
    }
    std::string rest = Strip(word, nullptr, false, true);
    if (!rest.empty()) parts.push_back(Value::Str(rest));
    return Value::MakeList(std::move(parts));
  }
  size_t pos = 0;
  for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
    size_t hit = sep->text.empty() ? std::string::npos : s.find(sep->text, pos);
    if (hit == std::string::npos) break;
    parts.push_back(Value::Str(s.substr(pos, hit - pos)));
    pos = hit + sep->text.size();
  }
  parts.push_back(Value::Str(s.substr(pos)));
  return Value::MakeList(std::move(parts));
}

}  // namespace

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = Utf8SequenceLength(s, pos);
    if (len == 0) len = 1;
    out.push_back(s.substr(pos, len));
    pos += len;
  }
  return out;
}

// Python str.strip/lstrip/rstrip: white space, or the code points of `chars`.
std::string Strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<std::string> cps = CodePoints(s);
  std::vector<std::string> set;
  if (chars != nullptr && chars->is_string()) set = CodePoints(chars->text);
  auto strip = [&](const std::string& cp) {
    if (chars != nullptr && chars->is_string()) {
      return std::find(set.begin(), set.end(), cp) != set.end();
    }
    size_t len = 0;
    return IsPythonWhiteSpace(DecodeUtf8At(cp, 0, &len));
  };
  size_t b = 0, e = cps.size();
  while (left && b < e && strip(cps[b])) ++b;
  while (right && e > b && strip(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

std::string MapAscii(std::string s, int (*fn)(int)) {
  for (char& c : s) c = static_cast<char>(fn(static_cast<unsigned char>(c)));
  return s;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out += s.substr(pos, hit - pos) + to;
    pos = hit + from.size();
  }
  return out + s.substr(pos);
}

const Value* Arg(const CallArgs& args, size_t index, std::string_view name) {
  if (index < args.positional.size()) return &args.positional[index];
  return args.Keyword(name);
}

int64_t IntArg(const CallArgs& args, size_t index, std::string_view name, int64_t fallback) {
  const Value* v = Arg(args, index, name);
  return v != nullptr && v->kind == Value::Kind::kInt ? v->integer : fallback;
}

Status UndefinedError(const std::string& what) {
  return InvalidArgument(fmt::format("{} on an undefined value", what));
}

// A method of `self` as a callable value.
Value Method(Value self, std::string name) {
  return Value::MakeFunction([self, name](const CallArgs& a) -> Result<Value> {
    const Value* a0 = Arg(a, 0, "");
    if (self.is_dict()) {
      if (name == "items") {
        List items;
        for (const auto& [k, v] : *self.dict) items.push_back(Value::MakeList({Value::Str(k), v}));
        return Value::MakeList(std::move(items));
      }
      if (name == "keys" || name == "values") {
        List items;
        for (const auto& [k, v] : *self.dict) items.push_back(name == "keys" ? Value::Str(k) : v);
        return Value::MakeList(std::move(items));
      }
      // get(key, default=None)
      const Value* found = a0 != nullptr ? self.Find(a0->Str()) : nullptr;
      if (found != nullptr) return *found;
      return a.positional.size() > 1 ? a.positional[1] : Value::None();
    }
    const std::string& s = self.text;
    if (name == "strip") return Value::Str(Strip(s, a0, true, true));
    if (name == "lstrip") return Value::Str(Strip(s, a0, true, false));
    if (name == "rstrip") return Value::Str(Strip(s, a0, false, true));
    if (name == "upper") return Value::Str(MapAscii(s, ::toupper));
    if (name == "lower") return Value::Str(MapAscii(s, ::tolower));
    if (name == "title") return Value::Str(Title(s));
    if (name == "capitalize") {
      std::string out = MapAscii(s, ::tolower);
      if (!out.empty())
        out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
      return Value::Str(out);
    }
    if (name == "split") return Split(s, a0, IntArg(a, 1, "maxsplit", -1));
    if (name == "replace") {
      if (a.positional.size() < 2) return InvalidArgument("str.replace needs two arguments");
      return Value::Str(
          Replace(s, a.positional[0].Str(), a.positional[1].Str(), IntArg(a, 2, "count", -1)));
    }
    if (name == "startswith" || name == "endswith") {
      if (a0 == nullptr) return InvalidArgument("str." + name + " needs an argument");
      List options = a0->is_list() ? *a0->list : List{*a0};
      for (const Value& o : options) {
        if (name == "startswith" ? s.starts_with(o.Str()) : s.ends_with(o.Str())) {
          return Value::Bool(true);
        }
      }
      return Value::Bool(false);
    }
    if (name == "find") {
      size_t hit = a0 == nullptr ? std::string::npos : s.find(a0->Str());
      return Value::Int(
          hit == std::string::npos ? -1 : static_cast<int64_t>(CountCodePoints(s.substr(0, hit))));
    }
    // join(iterable)
    if (a0 == nullptr) return InvalidArgument("str.join needs an argument");
    AIR_ASSIGN_OR_RETURN(List items, Iterate(*a0));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? s : "") + items[i].Str();
    return Value::Str(out);
  });
}

bool IsStrMethod(const std::string& n) {
  static const char* kNames[] = {"strip",    "lstrip",     "rstrip", "upper",   "lower",
                                 "title",    "capitalize", "split",  "replace", "startswith",
                                 "endswith", "find",       "join"};
  return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

Result<Value> Length(const Value& v) {
  if (v.is_string()) return Value::Int(static_cast<int64_t>(CountCodePoints(v.text)));
  if (v.is_list()) return Value::Int(static_cast<int64_t>(v.list->size()));
  if (v.is_dict()) return Value::Int(static_cast<int64_t>(v.dict->size()));
  if (v.is_undefined()) return Value::Int(0);
  return InvalidArgument(fmt::format("object of type '{}' has no len()", v.TypeName()));
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace air::engine::jinja
