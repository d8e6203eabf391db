// Readers and setters of `air train`'s parameter table (see train_config_fields.h).
#include "engine/train/train_config_fields.h"

#include <fmt/format.h>

#include <cmath>

#include "base/strings.h"

namespace air::engine::train::fields {

void ErrorList::Add(const std::string& where, const std::string& field,
                    const std::string& message) {
  lines_.push_back(field.empty() ? fmt::format("{}: {}", where, message)
                                 : fmt::format("{}: {}: {}", where, field, message));
}

Status ErrorList::ToStatus() const { return InvalidArgument(Join(lines_, "\n")); }

std::string SourceOf(const std::string& where) {
  const size_t last = where.rfind(':');
  if (last == std::string::npos) return where;
  const size_t before = where.rfind(':', last - 1);
  return before == std::string::npos ? where : where.substr(0, before);
}

std::string Describe(const YamlNode& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsMapping()) return "a map";
  if (node.IsNull()) return "nothing (null)";
  return node.IsQuotedOrTaggedString() ? fmt::format("the quoted string \"{}\"", node.value)
                                       : fmt::format("'{}'", node.value);
}

bool IsPlainScalar(const YamlNode& node) {
  return node.IsScalar() && !node.IsQuotedOrTaggedString();
}

bool IsText(const YamlNode& node) { return node.IsScalar() && !node.IsNull(); }

std::optional<int64_t> ReadInt(const YamlNode& node) {
  if (!IsPlainScalar(node)) return std::nullopt;
  const std::string& s = node.value;
  if (s.empty()) return std::nullopt;
  size_t pos = 0;
  try {
    long long v = std::stoll(s, &pos, 10);
    if (pos != s.size()) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<double> ReadFloat(const YamlNode& node) {
  if (!IsPlainScalar(node)) return std::nullopt;
  const std::string& s = node.value;
  if (s.empty()) return std::nullopt;
  size_t pos = 0;
  try {
    double v = std::stod(s, &pos);
    if (pos != s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<bool> ReadBool(const YamlNode& node) {
  if (!IsPlainScalar(node)) return std::nullopt;
  const std::string& s = node.value;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

bool InRange(double v, const Range& r) {
  if (r.min_inclusive ? v < r.min : v <= r.min) return false;
  if (r.max_inclusive ? v > r.max : v >= r.max) return false;
  return true;
}

Setter IntField(const std::string& name, std::function<int&(TrainConfig&)> field, Range range,
                std::function<bool(int64_t)> extra_ok) {
  return [=](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    std::optional<int64_t> v = ReadInt(g.node);
    if (!v) {
      errors.Add(g.where, name, fmt::format("expected an integer, got {}", Describe(g.node)));
      return;
    }
    bool ok = (extra_ok && extra_ok(*v)) ||
              (InRange(static_cast<double>(*v), range) && *v <= std::numeric_limits<int>::max());
    if (!ok) {
      errors.Add(g.where, name, fmt::format("{} is out of range: {}", *v, range.text));
      return;
    }
    field(c) = static_cast<int>(*v);
  };
}

Setter Int64Field(const std::string& name, std::function<int64_t&(TrainConfig&)> field) {
  return [=](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    std::optional<int64_t> v = ReadInt(g.node);
    if (!v) {
      errors.Add(g.where, name, fmt::format("expected an integer, got {}", Describe(g.node)));
      return;
    }
    field(c) = *v;
  };
}

Setter FloatField(const std::string& name, std::function<double&(TrainConfig&)> field,
                  Range range) {
  return [=](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    std::optional<double> v = ReadFloat(g.node);
    if (!v) {
      errors.Add(g.where, name, fmt::format("expected a number, got {}", Describe(g.node)));
      return;
    }
    if (!InRange(*v, range)) {
      errors.Add(g.where, name, fmt::format("{} is out of range: {}", g.node.value, range.text));
      return;
    }
    field(c) = *v;
  };
}

Setter BoolField(const std::string& name, std::function<bool&(TrainConfig&)> field) {
  return [=](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    std::optional<bool> v = ReadBool(g.node);
    if (!v) {
      errors.Add(g.where, name, fmt::format("expected true or false, got {}", Describe(g.node)));
      return;
    }
    field(c) = *v;
  };
}

Setter StringField(const std::string& name, std::function<std::string&(TrainConfig&)> field) {
  return [=](const GivenValue& g, TrainConfig& c, ErrorList& errors) {
    // A plain scalar like 123 is still a fine path name; null, lists and maps are not.
    if (!IsText(g.node) || Trim(g.node.value).empty()) {
      errors.Add(g.where, name,
                 fmt::format("expected a non-empty string, got {}", Describe(g.node)));
      return;
    }
    field(c) = g.node.value;
  };
}

}  // namespace air::engine::train::fields
