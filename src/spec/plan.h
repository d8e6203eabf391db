// The resolved plan of a workload, as `air run --dry-run` shows it: experiment, node count and
// shape, the environment each node gets (built by BuildNodeEnvironment, the same function the
// runtime launches with; secrets masked, launch-time values as placeholders), the command, the
// code snapshot's file count and size, how nodes reach /Volumes, retries and timeout, the
// parameters file, and the overrides that were applied. Rendered as text for people and as JSON
// for `-o json`.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/overrides.h"
#include "spec/snapshot_scan.h"
#include "spec/workload_spec.h"

namespace air::spec {

// How the nodes would reach /Volumes (runtime/volume_access.h, decided by the caller).
struct PlanVolumes {
  std::string access;  // "none", "host", "mount", "rewrite"
  std::string root;    // the volume root
  std::string detail;  // one line: which way and why
};

struct PlanInput {
  const WorkloadSpec* spec = nullptr;
  const SnapshotListing* snapshot = nullptr;  // when the spec has a code_source
  const std::vector<OverrideChange>* changes = nullptr;
  const PlanVolumes* volumes = nullptr;  // shown when set
};

nlohmann::ordered_json PlanToJson(const PlanInput& input);

// Multi-line text ending with "dry run: nothing was started\n".
std::string PlanToText(const PlanInput& input);

// "override FIELD: BEFORE -> AFTER" for each change.
std::string OverrideChangesText(const std::vector<OverrideChange>& changes);

}  // namespace air::spec
