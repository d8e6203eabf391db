// Resolving a workload's `secrets:` map (NAME: scope/key) to the values injected into the
// nodes' environment at launch. All references are checked in one read of the store; if any is
// missing the error names every missing scope/key (and the variable that wanted it), never a
// value. Thread safety: as SecretStore (safe from several threads).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "secrets/secret_store.h"
#include "spec/workload_spec.h"

namespace air::secrets {

// Returns (NAME, value) pairs in the order of `refs`. NotFound lists each missing reference as
// "NAME -> scope/key (reason)"; a damaged store gives its DataLoss error; FailedPrecondition
// names each value too long for its variable (NAME=VALUE over kMaxEnvironmentEntryBytes).
Result<std::vector<std::pair<std::string, std::string>>> ResolveSecrets(
    SecretStore& store, const std::vector<std::pair<std::string, spec::SecretRef>>& refs);

}  // namespace air::secrets
