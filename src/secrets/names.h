// Rules for secret scope and key names and for secret values (docs/secrets.md).
//
// Names: letters, digits, '-', '_' and '.', 1..128 bytes. Values: 1..128 KiB, no NUL byte
// (values reach nodes as environment variables, which cannot hold NUL). Every error names
// what is wrong and what would be valid. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace air::secrets {

inline constexpr size_t kMaxNameLength = 128;
inline constexpr size_t kMaxValueBytes = 128 * 1024;
// Linux caps one environment entry "NAME=VALUE" at 32 pages (MAX_ARG_STRLEN, 131072 bytes),
// counting the '=' and the final NUL; execve fails with E2BIG past it. So a value near
// kMaxValueBytes can be stored but not injected; ResolveSecrets checks each NAME=VALUE.
inline constexpr size_t kMaxEnvironmentEntryBytes = 128 * 1024;

// `what` is "scope" or "key"; the error reads e.g. "invalid scope name 'a b': ...".
Status ValidateName(std::string_view what, std::string_view name);

// Checks a value about to be stored under scope/key.
Status ValidateValue(std::string_view scope, std::string_view key, std::string_view value);

// "scope/key", the form used in workload YAML and in every message.
std::string SecretPath(std::string_view scope, std::string_view key);

}  // namespace air::secrets
