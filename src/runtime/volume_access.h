// How a run's nodes reach `/Volumes/...` (docs/volumes.md, "How nodes reach /Volumes"),
// decided on the submitting machine, once at submit (refusing there when no way works) and again
// when the supervisor prepares the run, by the first that applies:
//   kHost     /Volumes on this machine already is the volume root (the admin made /Volumes a
//             link to it or a mount of it, or the root is configured as /Volumes): nodes use it
//             as it is, no namespace.
//   kMount    a private mount namespace per node with the root bind-mounted on /Volumes
//             (agent/volume_mounts.h): as root, or through a user namespace.
//   kRewrite  this user may create neither namespace and the spec names /Volumes paths: each
//             such path in the command, the env_variables values and the parameters is
//             rewritten to the same path under the real root before the nodes get them.
//   kNone     the spec names no /Volumes path and no mount is possible: nodes run as they are.
// Every node also gets AIR_VOLUMES_ROOT, the real root, whichever way is used.
// Thread safety: stateless functions (the probe forks a short-lived child).
#pragma once

#include <string>
#include <string_view>

#include "agent/volume_mounts.h"
#include "base/status.h"
#include "spec/workload_spec.h"

namespace air::runtime {

enum class VolumeAccessKind { kNone, kHost, kMount, kRewrite };

struct VolumeAccess {
  VolumeAccessKind kind = VolumeAccessKind::kNone;
  std::string root;             // the volume root (runtime/volumes.h VolumesRoot)
  bool required = false;        // the spec names /Volumes paths: a node without them must fail
  bool user_namespace = false;  // kMount through a user namespace (not root)
  std::string why_no_mount;     // the probe's error, when a mount is not possible
};

struct VolumeAccessOptions {
  std::string mount_point = agent::kVolumesMountPoint;  // tests use another directory
  bool dry_run = false;  // probe without creating anything (`air run --dry-run`)
};

// Decides as above. Refused (kFailedPrecondition) when the spec names /Volumes paths and none
// of kHost, kMount, kRewrite is possible; the message says what would make it work.
Result<VolumeAccess> DecideVolumeAccess(const spec::WorkloadSpec& spec, const std::string& root,
                                        const VolumeAccessOptions& options = {});

// "none", "host", "mount", "rewrite".
const char* VolumeAccessName(VolumeAccessKind kind);

// One line for the dry-run plan: which way /Volumes is provided and why.
std::string DescribeVolumeAccess(const VolumeAccess& access);

// `text` with every /Volumes path in it (spec::FindVolumePathSpans) moved under `root`:
// "/Volumes/a/b/c/x" -> "<root>/a/b/c/x" ("dbfs:/Volumes/..." -> "dbfs:<root>/..."). The text
// as it is for any kind but kRewrite.
std::string RewriteVolumePaths(std::string_view text, const VolumeAccess& access);

// The spec as its nodes get it: command, env_variables values and parameters rewritten.
spec::WorkloadSpec SpecForNodes(const spec::WorkloadSpec& spec, const VolumeAccess& access);

}  // namespace air::runtime
