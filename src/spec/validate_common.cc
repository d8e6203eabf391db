// The validator's building blocks: mappings with unknown/duplicate key checks, string and
// integer readers, required keys (see validator.h).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "base/strings.h"
#include "spec/scalar_types.h"
#include "spec/validator.h"

namespace air::spec {
namespace {

// Keys that belong one level down, so a misplaced one gets a pointed hint.
const std::map<std::string, std::string>& NestedKeyParents() {
  static const std::map<std::string, std::string> kParents = {
      {"accelerator_type", "compute"},
      {"num_accelerators", "compute"},
      {"dependencies", "environment"},
      {"docker_image", "environment"},
      {"version", "environment"},
      {"snapshot", "code_source"},
      {"root_path", "code_source.snapshot"},
      {"include_paths", "code_source.snapshot"},
  };
  return kParents;
}

}  // namespace

const YamlNode* MappingView::Get(std::string_view key) const {
  for (const auto& [k, v] : values) {
    if (k == key) return v;
  }
  return nullptr;
}

const YamlNode* MappingView::KeyNode(std::string_view key) const {
  for (const auto& [k, v] : keys) {
    if (k == key) return v;
  }
  return nullptr;
}

std::string ResolveAgainst(const std::string& base_dir, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  std::string out = p.lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string JoinField(const std::string& prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  return prefix + "." + std::string(key);
}

void SpecValidator::Error(const YamlNode& at, const std::string& field, std::string message) {
  diagnostics_->Add(at.location, field, std::move(message), at.origin);
}

bool SpecValidator::CheckMapping(const YamlNode& node, const std::string& field,
                                 const std::vector<std::string>& allowed, std::string_view what,
                                 MappingView* view) {
  if (!node.IsMapping()) {
    Error(node, field, fmt::format("expected a mapping of {}, got {}", what, DescribeNode(node)));
    return false;
  }
  for (const auto& [key, value] : node.entries) {
    if (!key.IsScalar() || key.IsNull()) {
      Error(key, field, fmt::format("keys must be strings, got {}", DescribeNode(key)));
      continue;
    }
    std::string key_field = JoinField(field, key.value);
    if (const YamlNode* first = view->KeyNode(key.value)) {
      Error(key, key_field,
            fmt::format("duplicate key '{}' (first given at line {}, column {}); each key may "
                        "appear only once",
                        key.value, first->location.line, first->location.column));
      continue;
    }
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), key.value) == allowed.end()) {
      std::string message = fmt::format("unknown key '{}'", key.value);
      std::string suggestion = ClosestMatch(key.value, allowed);
      auto parent = NestedKeyParents().find(key.value);
      if (key.value == "<<") {
        message += "; YAML merge keys are not supported, write the keys out";
      } else if (!suggestion.empty()) {
        message += fmt::format(" (did you mean '{}'?)", suggestion);
      } else if (field.empty() && parent != NestedKeyParents().end()) {
        message += fmt::format(" at the top level; it belongs under '{}'", parent->second);
      } else {
        message +=
            fmt::format("; valid keys{}: {}", field.empty() ? "" : " here", Join(allowed, ", "));
      }
      Error(key, key_field, std::move(message));
      continue;
    }
    view->keys.emplace_back(key.value, &key);
    view->values.emplace_back(key.value, &value);
  }
  return true;
}

void SpecValidator::CheckDuplicateKeysDeep(const YamlNode& node, const std::string& field) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.items.size(); ++i) {
      CheckDuplicateKeysDeep(node.items[i], fmt::format("{}[{}]", field, i));
    }
    return;
  }
  if (!node.IsMapping()) return;
  MappingView view;
  CheckMapping(node, field, {}, "", &view);
  for (const auto& [key, value] : view.values)
    CheckDuplicateKeysDeep(*value, JoinField(field, key));
}

bool SpecValidator::ReadString(const YamlNode& node, const std::string& field, std::string* out,
                               bool allow_empty) {
  if (!node.IsScalar()) {
    Error(node, field, "expected a string, got " + DescribeNode(node));
    return false;
  }
  if (node.IsNull()) {
    Error(node, field, "has no value; expected a string");
    return false;
  }
  if (!allow_empty && Trim(node.value).empty()) {
    Error(node, field, "is empty; expected a non-empty string");
    return false;
  }
  if (node.value.find('\0') != std::string::npos) {
    Error(node, field, "contains a NUL character");
    return false;
  }
  *out = node.value;
  return true;
}

bool SpecValidator::ReadInt(const YamlNode& node, const std::string& field, int64_t* out) {
  std::string error;
  if (ReadDecimalInteger(node, out, &error)) return true;
  Error(node, field, std::move(error));
  return false;
}

bool SpecValidator::Require(const MappingView& view, const YamlNode& parent,
                            const std::string& prefix, std::string_view key,
                            std::string_view hint) {
  if (view.Get(key)) return true;
  std::string message = fmt::format("required key '{}' is missing", key);
  if (!hint.empty()) message += fmt::format("; {}", hint);
  Error(parent, JoinField(prefix, key), std::move(message));
  return false;
}

void SpecValidator::Remember(const std::string& field, const YamlNode& node, WorkloadSpec* spec) {
  spec->field_locations[field] = node.location;
  if (!node.origin.empty()) spec->field_origins[field] = node.origin;
}

}  // namespace air::spec
