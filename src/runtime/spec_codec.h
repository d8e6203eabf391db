// WorkloadSpec <-> JSON, so a submitted run carries its exact typed spec in the store
// (runs.spec_json) and the supervisor launches from that copy, never from a YAML file the user
// may have edited since. Secrets appear only as references (scope/key): the JSON never holds a
// secret value.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "spec/workload_spec.h"

namespace air::runtime {

nlohmann::json SpecToJson(const spec::WorkloadSpec& spec);
// DataLoss naming the field when the JSON is not a spec this binary wrote.
Result<spec::WorkloadSpec> SpecFromJson(const nlohmann::json& json);
Result<spec::WorkloadSpec> SpecFromJsonText(const std::string& text);

}  // namespace air::runtime
