// Formatting and ordering of spec diagnostics (see diagnostics.h).
#include "spec/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>

namespace air::spec {

namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string CharacterAt(std::string_view text, size_t offset) {
  if (offset >= text.size()) return "";
  size_t begin = offset;
  while (begin > 0 && IsContinuationByte(text[begin])) --begin;
  size_t end = begin + 1;
  while (end < text.size() && IsContinuationByte(text[end])) ++end;
  return std::string(text.substr(begin, end - begin));
}

std::string ShortenText(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes > 3 ? max_bytes - 3 : 0;
  while (cut > 0 && IsContinuationByte(text[cut])) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

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
