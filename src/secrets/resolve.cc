// ResolveSecrets: one consistent read, every missing reference reported at once.
#include "secrets/resolve.h"

#include <fmt/format.h>

#include "base/strings.h"
#include "secrets/names.h"

namespace air::secrets {

Result<std::vector<std::pair<std::string, std::string>>> ResolveSecrets(
    SecretStore& store, const std::vector<std::pair<std::string, spec::SecretRef>>& refs) {
  std::vector<std::pair<std::string, std::string>> resolved;
  if (refs.empty()) return resolved;
  AIR_ASSIGN_OR_RETURN(StoreSnapshot snapshot, store.Read());
  std::vector<std::string> missing;
  for (const auto& [name, ref] : refs) {
    std::string path = ref.ToString();
    Status scope_ok = ValidateName("scope", ref.scope);
    Status key_ok = ValidateName("key", ref.key);
    if (!scope_ok.ok() || !key_ok.ok()) {
      missing.push_back(
          fmt::format("{} -> {} ({})", name, path, (!scope_ok.ok() ? scope_ok : key_ok).message()));
      continue;
    }
    if (!snapshot.HasScope(ref.scope)) {
      missing.push_back(fmt::format("{} -> {} (scope '{}' does not exist)", name, path, ref.scope));
      continue;
    }
    if (!snapshot.HasSecret(ref.scope, ref.key)) {
      missing.push_back(
          fmt::format("{} -> {} (scope '{}' has no key '{}')", name, path, ref.scope, ref.key));
      continue;
    }
    AIR_ASSIGN_OR_RETURN(std::string value, snapshot.Reveal(ref.scope, ref.key));
    resolved.emplace_back(name, std::move(value));
  }
  if (!missing.empty()) {
    return NotFound(fmt::format(
        "{} secret{} referenced by the workload {} missing: {}; create them with `air secrets "
        "create-scope SCOPE` and `air secrets put-secret SCOPE KEY` (see `air secrets "
        "list-scopes`)",
        missing.size(), missing.size() == 1 ? "" : "s", missing.size() == 1 ? "is" : "are",
        Join(missing, "; ")));
  }
  return resolved;
}

std::vector<std::string> SecretValues(
    const std::vector<std::pair<std::string, std::string>>& resolved) {
  std::vector<std::string> values;
  for (const auto& [name, value] : resolved) values.push_back(value);
  return values;
}

}  // namespace air::secrets
