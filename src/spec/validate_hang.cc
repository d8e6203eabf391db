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

constexpr const char* kRangeText =
    "a number of minutes from 0.01 to 10080 (7 days), e.g. 30 or 0.5";

// A finite number (a YAML int or float) into *out; else the message saying what was found.
bool ReadMinutes(const YamlNode& node, double* out, std::string* error) {
  const ScalarType type = node.IsScalar() ? ResolveScalarType(node) : ScalarType::kString;
  if (type == ScalarType::kInt || type == ScalarType::kFloat) {
    int64_t whole = 0;
    std::string int_error;
    if (type == ScalarType::kInt) {
      if (!ReadDecimalInteger(node, &whole, &int_error)) {  // 0x1E, 010: say what to write
        *error = int_error;
        return false;
      }
      *out = static_cast<double>(whole);
      return true;
    }
    char* end = nullptr;
    const double value = std::strtod(node.value.c_str(), &end);
    if (end == node.value.c_str() + node.value.size() && std::isfinite(value)) {
      *out = value;
      return true;
    }
  }
  *error = fmt::format("expected {}, got {}", kRangeText, DescribeNode(node));
  if (node.IsQuotedOrTaggedString() && (type == ScalarType::kString)) {
    char* end = nullptr;
    (void)std::strtod(node.value.c_str(), &end);
    if (!node.value.empty() && end == node.value.c_str() + node.value.size()) {
      *error += " (remove the quotes)";
    }
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
            fmt::format("must be {}; got {}", kRangeText, timeout->value));
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
