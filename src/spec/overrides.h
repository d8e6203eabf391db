// `--override FIELD=VALUE`: changes to a workload document before it is validated, so an
// overridden value goes through exactly the same checks as one written in the file.
//
// FIELD is a dotted path into the spec (compute.num_accelerators, max_retries,
// code_source.snapshot.git.branch) or below one of the free-form maps: env_variables.NAME,
// secrets.NAME, parameters.KEY[.KEY...]. Fields that hold text (command, experiment_name,
// env_variables.NAME, ...) take VALUE literally; all others parse VALUE as YAML, so
// `max_retries=0` is an integer, `parameters.lr=1e-4` is whatever YAML makes of 1e-4 (a float in
// YAML 1.2), `parameters.tag='4'` is a string and `environment.dependencies=[a, b]` is a list.
// Missing intermediate mappings are created. Values set by an override carry the override as
// their origin, so errors about them name the override instead of a line.
// Thread safety: pure functions over the caller's tree.
#pragma once

#include <string>
#include <vector>

#include "spec/diagnostics.h"
#include "spec/yaml_tree.h"

namespace air::spec {

struct OverrideChange {
  std::string field;   // "env_variables.FOO"
  std::string before;  // the old value rendered on one line, or "(unset)"
  std::string after;
};

// The fields an override may name, for messages ("env_variables.NAME", "parameters.KEY...").
std::vector<std::string> OverridableFields();

// Applies `overrides` ("FIELD=VALUE" each) to `root` in order. Problems (no '=', an unknown
// field, a VALUE that is not YAML, a path through a non-mapping) go to `diagnostics` with the
// override as origin. Returns true when any override changed something under `parameters`.
bool ApplyOverrides(const std::vector<std::string>& overrides, YamlNode* root,
                    Diagnostics* diagnostics, std::vector<OverrideChange>* changes);

}  // namespace air::spec
