// The validator's hang settings (docs/workload-spec.md, "hang_timeout_minutes" and "on_hang"):
// hang_timeout_minutes is a number of minutes, fractions allowed, from kMinHangTimeoutMinutes
// to kMaxHangTimeoutMinutes; on_hang is `fail` or `restart` and needs hang_timeout_minutes.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "spec/scalar_types.h"
#include "spec/validator.h"

namespace air::spec {
namespace {

// What a valid value is, for every message.
std::string RangeText() {
  return fmt::format("a number of minutes from {} to {} (7 days), e.g. 30 or 0.5",
                     kMinHangTimeoutMinutes, kMaxHangTimeoutMinutes);
}

// Whether `text` is a whole decimal number as strtod reads it, and its value.
bool ParseNumber(const std::string& text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

// A finite number (a plain YAML int or float) into *out; else the message saying what was found.
bool ReadMinutes(const YamlNode& node, double* out, std::string* error) {
  const ScalarType type = node.IsScalar() ? ResolveScalarType(node) : ScalarType::kString;
  if (type == ScalarType::kInt) {
    int64_t whole = 0;
    // 0x1E, 010, 1_000: the integer reader says what to write instead.
    if (!ReadDecimalInteger(node, &whole, error)) return false;
    *out = static_cast<double>(whole);
    return true;
  }
  if (type == ScalarType::kFloat && ParseNumber(node.value, out) && std::isfinite(*out)) {
    return true;
  }
  *error = fmt::format("expected {}, got {}", RangeText(), DescribeNode(node));
  double ignored = 0;
  if (node.IsQuotedOrTaggedString() && ParseNumber(node.value, &ignored)) {
    *error += " (remove the quotes)";
  }
  return false;
}

}  // namespace

void SpecValidator::ValidateHangFields(const MappingView& top, WorkloadSpec* spec) {
  const YamlNode* timeout = top.Get("hang_timeout_minutes");
  if (timeout) {
    Remember("hang_timeout_minutes", *timeout, spec);
    double minutes = 0;
    std::string error;
    if (!ReadMinutes(*timeout, &minutes, &error)) {
      Error(*timeout, "hang_timeout_minutes", std::move(error));
    } else if (!(minutes >= kMinHangTimeoutMinutes && minutes <= kMaxHangTimeoutMinutes)) {
      Error(*timeout, "hang_timeout_minutes",
            fmt::format("must be {}; got {}", RangeText(), timeout->value));
    } else {
      spec->hang_timeout_minutes = minutes;
    }
  }
  const YamlNode* on_hang = top.Get("on_hang");
  if (!on_hang) return;
  std::string value;
  if (!ReadString(*on_hang, "on_hang", &value)) return;
  Remember("on_hang", *on_hang, spec);
  if (value == "fail") {
    spec->on_hang = OnHang::kFail;
  } else if (value == "restart") {
    spec->on_hang = OnHang::kRestart;
  } else {
    Error(*on_hang, "on_hang", fmt::format("must be fail or restart, got '{}'", value));
    return;
  }
  if (!timeout) {
    Error(*on_hang, "on_hang",
          "needs hang_timeout_minutes (how long every node may be silent before the attempt "
          "counts as hung); add e.g. hang_timeout_minutes: 30, or remove on_hang");
  }
}

}  // namespace air::spec
