// Formatting and ordering of spec diagnostics (see diagnostics.h).
#include "spec/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>

namespace air::spec {

std::string SpecDiagnostic::ToString() const {
  std::string where;
  if (!origin.empty()) {
    where = fmt::format("{}: {}", file, origin);
  } else if (line > 0) {
    where = fmt::format("{}:{}:{}", file, line, column);
  } else {
    where = file;
  }
  if (field.empty()) return fmt::format("{}: {}", where, message);
  return fmt::format("{}: {}: {}", where, field, message);
}

void Diagnostics::Add(SourceLocation location, std::string field, std::string message,
                      std::string origin) {
  SpecDiagnostic d;
  d.file = file_;
  d.line = origin.empty() ? location.line : 0;
  d.column = origin.empty() ? location.column : 0;
  d.field = std::move(field);
  d.message = std::move(message);
  d.origin = std::move(origin);
  items_.push_back(std::move(d));
}

std::vector<SpecDiagnostic> Diagnostics::Sorted() const {
  std::vector<SpecDiagnostic> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const SpecDiagnostic& a, const SpecDiagnostic& b) {
                     bool a_override = !a.origin.empty();
                     bool b_override = !b.origin.empty();
                     if (a_override != b_override) return b_override;
                     if (a_override) return false;  // keep the order the overrides were given
                     if (a.line != b.line) return a.line < b.line;
                     return a.column < b.column;
                   });
  return sorted;
}

}  // namespace air::spec
