// Writing YamlNode trees back as YAML text, keeping every value and its type: the parameters
// block of a workload becomes the file at HYPERPARAMETERS_PATH this way.
//
// ParametersText prefers the user's own source text of the block (de-indented, comments kept),
// so `learning_rate: 0.00002` stays exactly that; it re-reads what it extracted and falls back
// to EmitYaml when the text would not load to the same content (or the block was changed by an
// --override). EmitYaml writes block style: plain scalars exactly as written, every other
// scalar double-quoted, so a quoted '4' stays a string for any YAML loader.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "spec/yaml_tree.h"

namespace air::spec {

// Block-style YAML for `node`, ending in a newline.
std::string EmitYaml(const YamlNode& node);

// One-line rendering for messages: scalars as written (quoted when a loader would otherwise
// read them as another type), collections in flow style, shortened past `max_chars`.
std::string RenderInline(const YamlNode& node, size_t max_chars = 80);

// The YAML text of `node` taken from `source` (the file it was parsed from), de-indented and
// verified to load to the same content, else EmitYaml(node).
std::string ParametersText(std::string_view source, const YamlNode& node);

}  // namespace air::spec
