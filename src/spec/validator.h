// SpecValidator: turns a parsed workload document (YamlNode) into a WorkloadSpec, checking
// every key and rule of docs/workload-spec.md and adding every problem to one Diagnostics
// list (it never stops at the first). Internal to src/spec; callers use spec/parser.h.
//
// The checks are split by section: validate_common.cc (mapping, string and integer readers),
// validate_sections.cc (top level, compute, environment, command, scalars),
// validate_code_source.cc (code_source), validate_vars.cc (env_variables, secrets,
// parameters, permissions) and validate_hang.cc (hang_timeout_minutes, on_hang).
// Thread safety: one validator per document, used by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/env.h"
#include "spec/diagnostics.h"
#include "spec/workload_spec.h"
#include "spec/yaml_tree.h"

namespace air::spec {

// The first occurrence of each known key of a mapping.
struct MappingView {
  std::vector<std::pair<std::string, const YamlNode*>> values;  // key -> value
  std::vector<std::pair<std::string, const YamlNode*>> keys;    // key -> key node
  const YamlNode* Get(std::string_view key) const;
  const YamlNode* KeyNode(std::string_view key) const;
};

// `path` made absolute against `base_dir` when relative, lexically normalized.
std::string ResolveAgainst(const std::string& base_dir, const std::string& path);

// "a.b" (or "b" when prefix is empty).
std::string JoinField(const std::string& prefix, std::string_view key);

class SpecValidator {
 public:
  SpecValidator(Diagnostics* diagnostics, Env* env) : diagnostics_(diagnostics), env_(env) {}

  // Fills *spec from the document root (a mapping). spec->source_path and source_dir must be
  // set already: relative paths resolve against source_dir.
  void Validate(const YamlNode& root, WorkloadSpec* spec);

  // --- building blocks (validate_common.cc) ---
  void Error(const YamlNode& at, const std::string& field, std::string message);
  // Checks that `node` is a mapping, reports non-string, duplicate and (when `allowed` is not
  // empty) unknown keys with a did-you-mean, and fills *view. `what` names the expected content
  // for the type error. Returns false when `node` is not a mapping.
  bool CheckMapping(const YamlNode& node, const std::string& field,
                    const std::vector<std::string>& allowed, std::string_view what,
                    MappingView* view);
  // Reports duplicate and non-string keys in every mapping under `node` (free-form blocks).
  void CheckDuplicateKeysDeep(const YamlNode& node, const std::string& field);
  // A non-null scalar, as written. Reports and returns false otherwise (or when empty and
  // !allow_empty).
  bool ReadString(const YamlNode& node, const std::string& field, std::string* out,
                  bool allow_empty = false);
  bool ReadInt(const YamlNode& node, const std::string& field, int64_t* out);
  // Reports `key` missing from `parent` (at the parent's position) when absent from view.
  bool Require(const MappingView& view, const YamlNode& parent, const std::string& prefix,
               std::string_view key, std::string_view hint);
  void Remember(const std::string& field, const YamlNode& node, WorkloadSpec* spec);
  Env* env() { return env_; }

 private:
  // validate_sections.cc
  void ValidateExperimentName(const YamlNode& node, WorkloadSpec* spec);
  void ValidateCompute(const YamlNode& node, WorkloadSpec* spec);
  void ValidateEnvironment(const YamlNode& node, WorkloadSpec* spec);
  void ValidateDockerImage(const YamlNode& node, const std::string& field, DockerImageSpec* image,
                           WorkloadSpec* spec);
  // validate_code_source.cc
  void ValidateCodeSource(const YamlNode& node, WorkloadSpec* spec);
  void ValidateSnapshot(const YamlNode& node, const std::string& field, SnapshotSpec* snapshot,
                        WorkloadSpec* spec);
  void ValidateGitRef(const YamlNode& node, const std::string& field, GitRefSpec* git,
                      WorkloadSpec* spec);
  void ValidateCommand(const YamlNode& node, WorkloadSpec* spec);
  void ValidateScalarFields(const MappingView& top, WorkloadSpec* spec);
  // validate_hang.cc: hang_timeout_minutes and on_hang
  void ValidateHangFields(const MappingView& top, WorkloadSpec* spec);
  // validate_vars.cc
  void ValidateEnvVariables(const YamlNode& node, WorkloadSpec* spec);
  void ValidateSecrets(const YamlNode& node, const MappingView& top, WorkloadSpec* spec);
  bool CheckVariableName(const YamlNode& key, const std::string& field);
  void ValidatePermissions(const YamlNode& node, WorkloadSpec* spec);
  void ValidateParameters(const YamlNode& node, WorkloadSpec* spec);

  Diagnostics* diagnostics_;
  Env* env_;
};

}  // namespace air::spec
