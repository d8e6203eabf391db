// Volumes on the host side (docs/volumes.md): where `/Volumes` lives (the volume root:
// $AIR_VOLUMES_ROOT, else config.yaml's volumes_root, else <data root>/volumes, i.e.
// AIR_HOME/volumes unless config.yaml names a shared_root, as the Slurm backend does), checking
// a spec's volume paths at submit, getting the root ready for a run's nodes
// (agent/volume_mounts.h mounts it), and mapping a `/Volumes/...` path to the file under the
// root for `air volumes ls | cp | rm`.
// Thread safety: stateless functions.
#pragma once

#include <string>
#include <string_view>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "spec/workload_spec.h"

namespace air::runtime {

// $AIR_VOLUMES_ROOT (made absolute against the working directory), else
// layout.configured_volumes_root().
Result<std::string> VolumesRoot(const Layout& layout, Env* env);

// Submit-time checks of the spec's /Volumes paths (command, env_variables, parameters): each
// must parse (spec::ParseVolumePath), the volume root must be a writable directory, and the
// machine must allow the private mount namespace that shows it at /Volumes. Creates the root
// and every referenced <catalog>/<schema>/<volume> directory. Errors name the spec field (with
// its line) and the path; none of this happens when the spec mentions no /Volumes path.
Status CheckSpecVolumes(const spec::WorkloadSpec& spec, const std::string& root, Env* env);

// The root a run's nodes get on /Volumes: `root` when the spec mentions /Volumes or the mount
// namespace is available (a node whose script writes to /Volumes then never reaches the host's
// /Volumes), "" when neither (nodes run without the mount).
Result<std::string> RunVolumesRoot(const spec::WorkloadSpec& spec, const std::string& root,
                                   Env* env);

// The host path of `/Volumes/<...>` under `root`, refusing (kInvalidArgument) a path that does
// not parse, has fewer than `min_depth` components, or resolves (through a symlink a node
// planted) outside the root.
Result<std::string> HostPathOfVolume(std::string_view path, const std::string& root,
                                     size_t min_depth);

// True when `path` is a volume path ("/Volumes..." or "dbfs:/Volumes...").
bool IsVolumePath(std::string_view path);

}  // namespace air::runtime
