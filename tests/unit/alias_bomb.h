// AliasBomb: a "billion laughs" YAML document for tests of the one capped YAML loader
// (spec::LoadYaml) through each reader: 9 levels of 10 aliases each, 10^9 nodes once expanded,
// anchored as a0..a8 at the top level (so `key: *a8` appends the whole bomb to a mapping).
// Thread safety: a pure function.
#pragma once

#include <string>

namespace air::testing {

inline std::string AliasBomb() {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
    for (int j = 1; j < 10; ++j) text += ", " + prev;
    text += "]\n";
  }
  return text;
}

}  // namespace air::testing
