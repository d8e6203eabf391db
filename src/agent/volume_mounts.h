// /Volumes for a node on the local backend (docs/volumes.md): the node agent moves itself into a
// private mount namespace and bind-mounts the run's volume root (AIR_HOME/volumes, or
// AIR_VOLUMES_ROOT) onto /Volumes, so `/Volumes/<catalog>/<schema>/<volume>/...` in a command,
// an env variable or a parameter reaches air-managed storage and never the host's /Volumes.
// The namespace is private to the agent and its command: the host and other nodes' mounts are
// untouched, and the mount disappears with the node's last process.
//
// As root a plain mount namespace (unshare(CLONE_NEWNS)) is used; otherwise a user namespace
// that maps the caller's own uid and gid (CLONE_NEWUSER | CLONE_NEWNS), so files keep their
// owner. The mount point /Volumes is an empty directory of the host's root file system: it is
// created (empty) when missing and the caller may create it; nothing is ever written into it.
// Where neither namespace is allowed, runtime/volume_access.h picks another way (or refuses).
// Thread safety: EnterVolumeNamespace changes the calling process's namespaces and must run in a
// single-threaded process (the agent's main thread before it spawns anything).
#pragma once

#include <string>

#include "base/status.h"

namespace air::agent {

inline constexpr char kVolumesMountPoint[] = "/Volumes";

// Enters a private mount namespace with `root` bind-mounted on /Volumes (`mount_point` in
// tests). The error names the step and the path ("cannot create the mount point /Volumes: ...").
// Runs before the agent turns core dumps off (PR_SET_DUMPABLE 0 makes /proc/self/uid_map
// root's, so a user namespace could not be given its id map).
Status EnterVolumeNamespace(const std::string& root,
                            const std::string& mount_point = kVolumesMountPoint);

// The kind of namespace the agent would create.
enum class VolumeNamespaceKind {
  kMount,         // a plain mount namespace (root)
  kUserAndMount,  // a user namespace mapping the caller's ids, owning the mount namespace
};

struct VolumeProbeOptions {
  std::string mount_point = kVolumesMountPoint;
  // false: the probe writes nothing (`air run --dry-run`): a missing mount point is not
  // created (as root the probe then stops before the bind mount; otherwise it fails, since
  // only root can create it), and a missing `root` is replaced by the mount point itself as
  // the bind's source (the permission to bind does not depend on the source).
  bool may_create = true;
};

// Whether this process could do the above, and how: runs it in a short-lived child and
// reports the child's error. Safe to call from a multi-threaded process (the child only makes
// system calls). The child makes itself dumpable again first, as the agent is when it enters
// its namespace, so a caller that turned dumps off (a supervisor holding secret values) gets
// the agent's answer.
Result<VolumeNamespaceKind> ProbeVolumeNamespace(const std::string& root,
                                                 const VolumeProbeOptions& options = {});

}  // namespace air::agent
