// Applying --override FIELD=VALUE to a workload document (see overrides.h).
#include "spec/overrides.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/strings.h"
#include "spec/yaml_emit.h"

namespace air::spec {
namespace {

enum class FieldKind { kText, kTyped, kMapping };

// Each part of a FIELD below `parameters` may create a mapping; the document is checked and
// written recursively, so the nesting an override can add is bounded (as the file's is).
constexpr size_t kMaxFieldParts = 64;

struct SchemaField {
  const char* path;
  FieldKind kind;
};

// Every field of the workload schema that an override may set, whole sections included.
constexpr SchemaField kSchema[] = {
    {"experiment_name", FieldKind::kText},
    {"compute", FieldKind::kMapping},
    {"compute.accelerator_type", FieldKind::kText},
    {"compute.num_accelerators", FieldKind::kTyped},
    {"environment", FieldKind::kMapping},
    {"environment.version", FieldKind::kTyped},
    {"environment.dependencies", FieldKind::kTyped},
    {"environment.docker_image", FieldKind::kMapping},
    {"environment.docker_image.url", FieldKind::kText},
    {"environment.docker_image.basic_auth", FieldKind::kMapping},
    {"environment.docker_image.basic_auth.username", FieldKind::kText},
    {"environment.docker_image.basic_auth.password", FieldKind::kText},
    {"code_source", FieldKind::kMapping},
    {"code_source.type", FieldKind::kText},
    {"code_source.snapshot", FieldKind::kMapping},
    {"code_source.snapshot.root_path", FieldKind::kText},
    {"code_source.snapshot.include_paths", FieldKind::kTyped},
    {"code_source.snapshot.git", FieldKind::kMapping},
    {"code_source.snapshot.git.branch", FieldKind::kText},
    {"code_source.snapshot.git.commit", FieldKind::kText},
    {"command", FieldKind::kText},
    {"env_variables", FieldKind::kMapping},
    {"secrets", FieldKind::kMapping},
    {"max_retries", FieldKind::kTyped},
    {"timeout_minutes", FieldKind::kTyped},
    {"system_metrics_interval_s", FieldKind::kTyped},
    {"hang_timeout_minutes", FieldKind::kTyped},
    {"on_hang", FieldKind::kText},
    {"parameters", FieldKind::kMapping},
    {"idempotency_token", FieldKind::kText},
    {"mlflow_run_name", FieldKind::kText},
    {"mlflow_experiment_directory", FieldKind::kText},
    {"permissions", FieldKind::kTyped},
};

// The kind of `field`, or nullopt when no override may name it.
std::optional<FieldKind> KindOf(const std::vector<std::string>& parts) {
  const std::string& head = parts[0];
  if (head == "env_variables" || head == "secrets") {
    if (parts.size() == 2) return FieldKind::kText;
    if (parts.size() == 1) return FieldKind::kMapping;
    return std::nullopt;
  }
  if (head == "parameters") return parts.size() == 1 ? FieldKind::kMapping : FieldKind::kTyped;
  std::string joined = Join(parts, ".");
  for (const auto& f : kSchema) {
    if (joined == f.path) return f.kind;
  }
  return std::nullopt;
}

void MarkOrigin(YamlNode* node, const std::string& origin) {
  node->origin = origin;
  node->location = {};
  node->begin_offset = node->end_offset = 0;
  for (auto& item : node->items) MarkOrigin(&item, origin);
  for (auto& [k, v] : node->entries) {
    MarkOrigin(&k, origin);
    MarkOrigin(&v, origin);
  }
}

YamlNode TextNode(std::string text, const std::string& origin) {
  YamlNode node;
  node.value = std::move(text);
  node.style = ScalarStyle::kDoubleQuoted;  // literal text: never re-typed
  node.origin = origin;
  return node;
}

YamlNode EmptyMapping(const std::string& origin) {
  YamlNode node;
  node.kind = YamlKind::kMapping;
  node.origin = origin;
  return node;
}

}  // namespace

std::vector<std::string> OverridableFields() {
  std::vector<std::string> fields;
  for (const auto& f : kSchema) {
    fields.emplace_back(f.path);
    if (std::string_view(f.path) == "env_variables") fields.emplace_back("env_variables.NAME");
    if (std::string_view(f.path) == "secrets") fields.emplace_back("secrets.NAME");
    if (std::string_view(f.path) == "parameters") fields.emplace_back("parameters.KEY[.KEY...]");
  }
  return fields;
}

bool ApplyOverrides(const std::vector<std::string>& overrides, YamlNode* root,
                    Diagnostics* diagnostics, std::vector<OverrideChange>* changes) {
  bool parameters_changed = false;
  for (const std::string& item : overrides) {
    const std::string origin = "--override " + item;
    auto report = [&](const std::string& field, std::string message) {
      diagnostics->Add({}, field, std::move(message), origin);
    };
    if (size_t bad = 0; !IsValidUtf8(item, &bad)) {
      report("", fmt::format("invalid UTF-8 at byte {} (0x{:02x}); an override must be UTF-8 text, "
                             "like the workload file",
                             bad, static_cast<unsigned char>(item[bad])));
      continue;
    }
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      report("", "expected FIELD=VALUE, e.g. --override max_retries=0");
      continue;
    }
    std::string field = item.substr(0, eq);
    std::string value_text = item.substr(eq + 1);
    std::vector<std::string> parts = Split(field, '.');
    if (parts.size() > kMaxFieldParts) {
      report("", fmt::format("FIELD has {} dotted parts; at most {} are allowed", parts.size(),
                             kMaxFieldParts));
      continue;
    }
    if (std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
      report(field, "has an empty part; write dotted keys such as compute.num_accelerators");
      continue;
    }
    std::optional<FieldKind> kind = KindOf(parts);
    if (!kind) {
      std::vector<std::string> valid = OverridableFields();
      std::string message = fmt::format("unknown field '{}'", field);
      std::vector<std::string> plain;
      for (const auto& f : kSchema) plain.emplace_back(f.path);
      std::string suggestion = ClosestMatch(field, plain);
      if (!suggestion.empty()) message += fmt::format(" (did you mean '{}'?)", suggestion);
      message += "; valid fields: " + Join(valid, ", ");
      report(field, std::move(message));
      continue;
    }
    YamlNode value;
    if (*kind == FieldKind::kText) {
      value = TextNode(value_text, origin);
    } else {
      std::string error;
      if (!ParseYamlValue(value_text, &value, &error)) {
        report(field, fmt::format("VALUE '{}' is not valid YAML: {}", value_text, error));
        continue;
      }
      MarkOrigin(&value, origin);
    }
    // Walk down, creating missing mappings; stop at anything that is not a mapping.
    YamlNode* node = root;
    bool blocked = false;
    for (size_t i = 0; i + 1 < parts.size() && !blocked; ++i) {
      YamlNode* child = node->Find(parts[i]);
      if (!child) {
        node->entries.emplace_back(TextNode(parts[i], origin), EmptyMapping(origin));
        node->entries.back().first.style = ScalarStyle::kPlain;
        child = &node->entries.back().second;
      } else if (!child->IsMapping()) {
        std::string at =
            child->origin.empty() ? fmt::format(" (line {})", child->location.line) : "";
        report(field, fmt::format("cannot set '{}': '{}' is {}{}, not a mapping", field,
                                  Join({parts.begin(), parts.begin() + i + 1}, "."),
                                  DescribeNode(*child), at));
        blocked = true;
      }
      node = child;
    }
    if (blocked) continue;
    // Text fields show the text itself; typed values as YAML reads them ('7' for a string).
    OverrideChange change{field, "(unset)",
                          *kind == FieldKind::kText ? value_text : RenderInline(value)};
    if (YamlNode* existing = node->Find(parts.back())) {
      change.before = RenderInline(*existing);
      *existing = std::move(value);
    } else {
      YamlNode key = TextNode(parts.back(), origin);
      key.style = ScalarStyle::kPlain;
      node->entries.emplace_back(std::move(key), std::move(value));
    }
    if (parts[0] == "parameters") parameters_changed = true;
    changes->push_back(std::move(change));
  }
  return parameters_changed;
}

}  // namespace air::spec
