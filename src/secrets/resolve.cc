// ResolveSecrets: one consistent read, every missing reference reported at once.
#include "secrets/resolve.h"

#include <fmt/format.h>
#include <sodium.h>

#include "base/strings.h"
#include "secrets/names.h"

namespace air::secrets {

Result<std::vector<std::pair<std::string, std::string>>> ResolveSecrets(
    SecretStore& store, const std::vector<std::pair<std::string, spec::SecretRef>>& refs) {
  std::vector<std::pair<std::string, std::string>> resolved;
  if (refs.empty()) return resolved;
  AIR_ASSIGN_OR_RETURN(StoreSnapshot snapshot, store.Read());
  std::vector<std::string> missing;
  std::vector<std::string> too_long;
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
    // "NAME=VALUE" plus its NUL must fit in one environment entry, or every launch fails.
    size_t entry_bytes = name.size() + 1 + value.size() + 1;
    if (entry_bytes > kMaxEnvironmentEntryBytes) {
      too_long.push_back(fmt::format("{} -> {} ({} bytes; at most {} for this variable)", name,
                                     path, value.size(),
                                     kMaxEnvironmentEntryBytes - name.size() - 2));
    }
    resolved.emplace_back(name, std::move(value));
  }
  if (!missing.empty() || !too_long.empty()) {
    for (auto& [name, value] : resolved) sodium_memzero(value.data(), value.size());
  }
  if (!missing.empty()) {
    return NotFound(fmt::format(
        "{} secret{} referenced by the workload {} missing: {}; create {} with `air secrets "
        "create-scope SCOPE` and `air secrets put-secret SCOPE KEY` (see `air secrets "
        "list-scopes`)",
        missing.size(), missing.size() == 1 ? "" : "s", missing.size() == 1 ? "is" : "are",
        Join(missing, "; "), missing.size() == 1 ? "it" : "them"));
  }
  if (!too_long.empty()) {
    return FailedPrecondition(fmt::format(
        "{} secret value{} too long to pass as an environment variable: {}; Linux limits one "
        "NAME=VALUE entry to {} bytes including the '=' and a final NUL byte (MAX_ARG_STRLEN); "
        "store a shorter value (a large credential file is better kept on the nodes, with its "
        "path in env_variables)",
        too_long.size(), too_long.size() == 1 ? " is" : "s are", Join(too_long, "; "),
        kMaxEnvironmentEntryBytes));
  }
  return resolved;
}

}  // namespace air::secrets
