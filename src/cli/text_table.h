// Left-aligned text columns for the CLI's tables (`air secrets list-*`, `air volumes ls`).
// Thread safety: a pure function.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace air::cli {

// Rows padded to each column's widest cell plus two spaces; the last column is not padded.
inline std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += '\n';
  }
  return out;
}

}  // namespace air::cli
