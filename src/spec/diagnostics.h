// Diagnostics: the errors found in a workload file, collected in one pass and printed as
// `FILE:LINE:COL: field.path: message`, sorted by position.
//
// Every check of the spec (YAML syntax, types, unknown and duplicate keys, rules, overrides)
// adds to one Diagnostics list instead of stopping at the first problem, so the user sees
// everything that is wrong at once. An error caused by an `--override FIELD=VALUE` carries
// that override as its origin (printed instead of a line and column) and is sorted after the
// file's errors.
// Thread safety: a value type; one owner at a time.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spec/workload_spec.h"

namespace air::spec {

struct SpecDiagnostic {
  std::string file;     // the workload file (as given by the user)
  int line = 0;         // 1-based; 0 when the error is not tied to a position
  int column = 0;       // 1-based character column
  std::string field;    // dotted path such as "compute.num_accelerators"; may be empty
  std::string message;  // what is wrong and what would be valid
  std::string origin;   // "--override FIELD=VALUE" when the value came from an override

  // "FILE:LINE:COL: field: message", or "FILE: --override X=Y: field: message" for overrides.
  std::string ToString() const;
};

// Helpers for quoting user text in messages without splitting a UTF-8 character (a split
// one makes the message invalid UTF-8, which JSON output cannot carry).
// The whole character that byte `offset` of `text` belongs to.
std::string CharacterAt(std::string_view text, size_t offset);
// `text` itself when it has at most `max_bytes` bytes, else its longest prefix of whole
// characters that leaves room for "..." within `max_bytes`, followed by "...".
std::string ShortenText(std::string_view text, size_t max_bytes);

class Diagnostics {
 public:
  Diagnostics() = default;
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}
  void set_file(std::string file) { file_ = std::move(file); }

  // Adds an error at a position in the file (origin empty) or from an override (origin set).
  void Add(SourceLocation location, std::string field, std::string message,
           std::string origin = "");

  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const std::string& file() const { return file_; }

  // The errors sorted by line and column (stable), override errors last in the order added.
  std::vector<SpecDiagnostic> Sorted() const;

 private:
  std::string file_;
  std::vector<SpecDiagnostic> items_;
};

}  // namespace air::spec
