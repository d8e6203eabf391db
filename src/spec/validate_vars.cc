// The validator's sections env_variables, secrets, parameters and permissions (see
// validator.h, docs/workload-spec.md).
#include <fmt/format.h>

#include <algorithm>

#include "base/strings.h"
#include "spec/node_env.h"
#include "spec/validator.h"

namespace air::spec {
namespace {

constexpr size_t kMaxSecretPartLength = 128;
const std::vector<std::string>& PrincipalKinds() {
  static const std::vector<std::string> kKinds = {"user_name", "group_name",
                                                  "service_principal_name"};
  return kKinds;
}

const std::vector<std::string>& PermissionLevels() {
  static const std::vector<std::string> kLevels = {"CAN_VIEW", "CAN_MANAGE_RUN", "CAN_MANAGE"};
  return kLevels;
}

bool IsValidVariableName(std::string_view name) {
  if (name.empty() || isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// "" when `part` is a valid secret scope or key name, else what is wrong with it.
std::string SecretPartProblem(std::string_view part) {
  if (part.empty()) return "is empty";
  if (part.size() > kMaxSecretPartLength) {
    return fmt::format("is longer than {} characters", kMaxSecretPartLength);
  }
  for (size_t i = 0; i < part.size(); ++i) {
    char c = part[i];
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return fmt::format("contains '{}'; use letters, digits, '-', '_' and '.'",
                         CharacterAt(part, i));
    }
  }
  return "";
}

}  // namespace

bool SpecValidator::CheckVariableName(const YamlNode& key, const std::string& field) {
  const std::string& name = key.value;
  if (!IsValidVariableName(name)) {
    Error(key, field,
          fmt::format("'{}' is not a valid environment variable name; use letters, digits and "
                      "'_', not starting with a digit",
                      name));
    return false;
  }
  if (IsReservedEnvironmentName(name)) {
    Error(key, field,
          fmt::format("{} is set by air on every node and cannot be overridden; reserved: {} and "
                      "every name starting with AIR_",
                      name, Join(ReservedEnvironmentNames(), ", ")));
    return false;
  }
  return true;
}

void SpecValidator::ValidateEnvVariables(const YamlNode& node, WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, "env_variables", {}, "NAME: value pairs", &view)) return;
  Remember("env_variables", node, spec);
  for (size_t i = 0; i < view.values.size(); ++i) {
    const auto& [name, value] = view.values[i];
    std::string field = JoinField("env_variables", name);
    bool name_ok = CheckVariableName(*view.keys[i].second, field);
    if (!value->IsScalar()) {
      Error(*value, field, "expected a string value, got " + DescribeNode(*value));
      continue;
    }
    if (value->IsNull()) {
      Error(*value, field, "has no value; write '' for an empty string");
      continue;
    }
    if (value->value.find('\0') != std::string::npos) {
      Error(*value, field, "contains a NUL character");
      continue;
    }
    if (name_ok) {
      Remember(field, *view.keys[i].second, spec);
      spec->env_variables.emplace_back(name, value->value);
    }
  }
}

void SpecValidator::ValidateSecrets(const YamlNode& node, const MappingView& top,
                                    WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, "secrets", {}, "NAME: scope/key pairs", &view)) return;
  MappingView env_view;
  if (const YamlNode* env = top.Get("env_variables"); env && env->IsMapping()) {
    for (const auto& [k, v] : env->entries) {
      if (k.IsScalar() && !env_view.KeyNode(k.value)) env_view.keys.emplace_back(k.value, &k);
    }
  }
  for (size_t i = 0; i < view.values.size(); ++i) {
    const auto& [name, value] = view.values[i];
    const YamlNode& key = *view.keys[i].second;
    std::string field = JoinField("secrets", name);
    bool name_ok = CheckVariableName(key, field);
    if (const YamlNode* env_key = env_view.KeyNode(name)) {
      Error(key, field,
            fmt::format("{} is also set in env_variables (line {}); a name may appear in only one "
                        "of env_variables and secrets",
                        name, env_key->location.line));
      name_ok = false;
    }
    std::string ref;
    if (!ReadString(*value, field, &ref)) continue;
    auto slash = ref.find('/');
    if (slash == std::string::npos || ref.find('/', slash + 1) != std::string::npos) {
      Error(*value, field,
            fmt::format("expected a secret reference 'scope/key' with exactly one '/', got '{}'",
                        ref));
      continue;
    }
    SecretRef secret{ref.substr(0, slash), ref.substr(slash + 1)};
    std::string scope_problem = SecretPartProblem(secret.scope);
    std::string key_problem = SecretPartProblem(secret.key);
    if (!scope_problem.empty() || !key_problem.empty()) {
      Error(*value, field,
            fmt::format("'{}' is not a valid 'scope/key': the {} {}", ref,
                        scope_problem.empty() ? "key" : "scope",
                        scope_problem.empty() ? key_problem : scope_problem));
      continue;
    }
    if (name_ok) {
      Remember(field, key, spec);
      spec->secrets.emplace_back(name, secret);
    }
  }
}

void SpecValidator::ValidateParameters(const YamlNode& node, WorkloadSpec* spec) {
  if (node.IsNull()) {
    Error(node, "parameters",
          "has no value; give the hyperparameters as an indented block (or remove the key)");
    return;
  }
  Remember("parameters", node, spec);
  CheckDuplicateKeysDeep(node, "parameters");
}

void SpecValidator::ValidatePermissions(const YamlNode& node, WorkloadSpec* spec) {
  if (!node.IsSequence()) {
    Error(node, "permissions",
          "expected a list of {user_name | group_name | service_principal_name, level}, got " +
              DescribeNode(node));
    return;
  }
  std::vector<std::string> allowed = PrincipalKinds();
  allowed.push_back("level");
  for (size_t i = 0; i < node.items.size(); ++i) {
    const YamlNode& item = node.items[i];
    std::string field = fmt::format("permissions[{}]", i);
    MappingView view;
    if (!CheckMapping(item, field, allowed, "a principal and a level", &view)) continue;
    PermissionSpec permission;
    std::vector<std::string> given;
    for (const auto& kind : PrincipalKinds()) {
      if (view.Get(kind)) given.push_back(kind);
    }
    bool ok = true;
    if (given.size() != 1) {
      Error(item, field,
            given.empty()
                ? "give one of user_name, group_name or service_principal_name"
                : fmt::format("give exactly one principal, not {}", Join(given, " and ")));
      ok = false;
    } else {
      permission.principal_kind = given[0];
      ok &= ReadString(*view.Get(given[0]), JoinField(field, given[0]), &permission.principal);
    }
    if (Require(view, item, field, "level", "one of " + Join(PermissionLevels(), ", "))) {
      const YamlNode& level = *view.Get("level");
      if (ReadString(level, field + ".level", &permission.level)) {
        if (std::find(PermissionLevels().begin(), PermissionLevels().end(), permission.level) ==
            PermissionLevels().end()) {
          Error(level, field + ".level",
                fmt::format("unknown permission level '{}'{}; valid: {}", permission.level,
                            DidYouMeanSuffix(permission.level, PermissionLevels()),
                            Join(PermissionLevels(), ", ")));
          ok = false;
        }
      } else {
        ok = false;
      }
    } else {
      ok = false;
    }
    if (ok) spec->permissions.push_back(permission);
  }
}

}  // namespace air::spec
