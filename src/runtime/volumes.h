// Volumes on the host side (docs/volumes.md): where `/Volumes` lives (the volume root:
// $AIR_VOLUMES_ROOT, else config.yaml's volumes_root, else <data root>/volumes, i.e.
// AIR_HOME/volumes unless config.yaml names a shared_root, as the Slurm backend does), checking
// a spec's volume paths at submit, getting the root ready for a run's nodes
// (runtime/volume_access.h decides how they reach it), and mapping a `/Volumes/...` path to the
// path below the root for `air volumes ls | cp | rm`, which reach it through base/rooted_dir.h
// (no symbolic link under the root is ever followed: nodes, and other users of a shared root,
// can plant them).
// Thread safety: stateless functions.
#pragma once

#include <string>
#include <string_view>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "runtime/volume_access.h"
#include "spec/workload_spec.h"

namespace air::runtime {

// $AIR_VOLUMES_ROOT (made absolute against the working directory), else
// layout.configured_volumes_root().
Result<std::string> VolumesRoot(const Layout& layout, Env* env);

// Submit-time checks of the spec's /Volumes paths (command, env_variables, parameters): each
// must parse (spec::ParseVolumePath) and must not lead through a symbolic link below the root
// (CheckVolumeLinks), the volume root must be a writable directory, and the nodes must have a
// way to reach it (runtime/volume_access.h: the host's /Volumes, a mount namespace, or the
// paths rewritten). Creates the root and every referenced <catalog>/<schema>/<volume>
// directory. Errors name the spec field (with its line) and the path; none of this happens
// when the spec mentions no /Volumes path (the result is then kNone, undecided).
Result<VolumeAccess> CheckSpecVolumes(const spec::WorkloadSpec& spec, const std::string& root,
                                      Env* env);

// The part of those checks that depends on the spec only, run by `air run --dry-run` as well:
// no referenced path may lead through a symbolic link that exists below `root` (one could
// lead a node's writes outside the volumes). Reads only; a missing root is fine.
Status CheckVolumeLinks(const spec::WorkloadSpec& spec, const std::string& root);

// The way a run's nodes reach the volumes (runtime/volume_access.h): CheckSpecVolumes when the
// spec mentions /Volumes; otherwise a mount when the machine allows one (a script that writes
// to /Volumes then never reaches the host's /Volumes), else none.
Result<VolumeAccess> RunVolumeAccess(const spec::WorkloadSpec& spec, const std::string& root,
                                     Env* env);

// The path below the volume root of `/Volumes/<...>` ("" for /Volumes itself), refusing
// (kInvalidArgument) a path that does not parse or has fewer than `min_depth` components.
Result<std::string> VolumeRelativePath(std::string_view path, size_t min_depth);

// True when `path` is a volume path ("/Volumes..." or "dbfs:/Volumes...").
bool IsVolumePath(std::string_view path);

}  // namespace air::runtime
