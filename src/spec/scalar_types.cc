// YAML 1.2 core-schema scalar typing (see scalar_types.h).
#include "spec/scalar_types.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string_view>

namespace air::spec {
namespace {

bool AllOf(std::string_view s, int (*pred)(int)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

int IsOctalDigit(int c) { return c >= '0' && c <= '7'; }

std::string_view StripSign(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return s;
}

bool IsCoreInt(std::string_view s) {
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o') return AllOf(s.substr(2), IsOctalDigit);
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x') return AllOf(s.substr(2), isxdigit);
  return AllOf(StripSign(s), isdigit);
}

bool IsCoreFloat(std::string_view s) {
  std::string_view body = StripSign(s);
  if (body == ".inf" || body == ".Inf" || body == ".INF") return true;
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return true;
  // [0-9]+(\.[0-9]*)? | \.[0-9]+, then ([eE][-+]?[0-9]+)?
  size_t i = 0;
  size_t int_digits = 0;
  while (i < body.size() && isdigit(static_cast<unsigned char>(body[i]))) ++i, ++int_digits;
  size_t frac_digits = 0;
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && isdigit(static_cast<unsigned char>(body[i]))) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    if (i < body.size() && (body[i] == '-' || body[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < body.size() && isdigit(static_cast<unsigned char>(body[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == body.size();
}

}  // namespace

ScalarType ResolveScalarType(const YamlNode& node) {
  if (node.IsNull()) return ScalarType::kNull;
  if (node.kind != YamlKind::kScalar || node.IsQuotedOrTaggedString()) return ScalarType::kString;
  const std::string& v = node.value;
  if (v == "true" || v == "True" || v == "TRUE" || v == "false" || v == "False" || v == "FALSE") {
    return ScalarType::kBool;
  }
  if (IsCoreInt(v)) return ScalarType::kInt;
  if (IsCoreFloat(v)) return ScalarType::kFloat;
  return ScalarType::kString;
}

bool ReadDecimalInteger(const YamlNode& node, int64_t* out, std::string* error) {
  if (!node.IsScalar() || node.IsNull()) {
    *error = "expected an integer, got " + DescribeNode(node);
    return false;
  }
  const std::string& v = node.value;
  if (node.IsQuotedOrTaggedString()) {
    *error = "expected an integer, got " + DescribeNode(node);
    if (IsCoreInt(v) && !v.empty()) *error += " (remove the quotes)";
    return false;
  }
  std::string_view digits = StripSign(v);
  if (AllOf(digits, isdigit)) {
    if (digits.size() > 1 && digits[0] == '0') {
      std::string_view trimmed = digits.substr(digits.find_first_not_of('0') == std::string::npos
                                                   ? digits.size() - 1
                                                   : digits.find_first_not_of('0'));
      *error = fmt::format(
          "'{}' has a leading zero, which YAML 1.1 reads as octal and YAML 1.2 as decimal; "
          "write {}",
          v, trimmed);
      return false;
    }
    int64_t value = 0;
    const char* begin = v.data() + (v[0] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(begin, v.data() + v.size(), value);
    if (ec != std::errc() || ptr != v.data() + v.size()) {
      *error = fmt::format("'{}' is out of range for an integer", v);
      return false;
    }
    *out = value;
    return true;
  }
  ScalarType type = ResolveScalarType(node);
  if (type == ScalarType::kInt) {  // 0x1F or 0o17
    int base = v[1] == 'x' ? 16 : 8;
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(v.data() + 2, v.data() + v.size(), value, base);
    if (ec == std::errc() && ptr == v.data() + v.size()) {
      *error = fmt::format("'{}' is not a decimal integer; write {}", v, value);
    } else {
      *error = fmt::format("'{}' is not a decimal integer", v);
    }
    return false;
  }
  if (v.find('_') != std::string::npos) {
    std::string without;
    for (char c : v) {
      if (c != '_') without += c;
    }
    if (AllOf(StripSign(without), isdigit)) {
      *error = fmt::format("'{}' uses '_' separators (YAML 1.1 only); write {}", v, without);
      return false;
    }
  }
  if (type == ScalarType::kFloat) {
    // strtod reads neither YAML's .inf nor .nan (it stops at the '.', giving 0), and casting
    // inf, nan or a huge value to int64_t is undefined: only a fully parsed, finite, moderate
    // whole number gets a "write N".
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    bool parsed = end == v.c_str() + v.size();
    if (parsed && d > -1e15 && d < 1e15 && d == static_cast<double>(static_cast<int64_t>(d))) {
      *error = fmt::format("expected an integer, got the float '{}'; write {}", v,
                           static_cast<int64_t>(d));
    } else {
      *error = fmt::format("expected an integer, got the float '{}'", v);
    }
    return false;
  }
  if (type == ScalarType::kBool) {
    *error = fmt::format("expected an integer, got the boolean '{}'", v);
    return false;
  }
  *error = "expected an integer, got " + DescribeNode(node);
  return false;
}

}  // namespace air::spec
