// How air types YAML scalars: the YAML 1.2 core schema, strictly.
//
// A quoted or block scalar ('4', "on", |-text) is always a string. A plain scalar is null
// (~, null, empty), a boolean (true/false in any of True, TRUE), an integer (decimal, 0o17,
// 0x1F), a float (1.5, 1e3, .inf, .nan) or else a string. So `on`, `yes`, `no` and `off` are
// strings, not booleans as in YAML 1.1. Integer fields of the workload (num_accelerators,
// max_retries, timeout_minutes) accept only plain decimal integers: `010` (octal in YAML 1.1,
// decimal in 1.2), `0x1F`, `1_000` and `1e3` are rejected with the spelling to use instead.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "spec/yaml_tree.h"

namespace air::spec {

enum class ScalarType { kNull, kBool, kInt, kFloat, kString };

// The YAML 1.2 core-schema type of a scalar node (kString for collections is never asked).
ScalarType ResolveScalarType(const YamlNode& node);

// Reads a plain decimal integer into *out. On failure returns false and sets *error to a
// message that says what was found and what to write instead.
bool ReadDecimalInteger(const YamlNode& node, int64_t* out, std::string* error);

}  // namespace air::spec
