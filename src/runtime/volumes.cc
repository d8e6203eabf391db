// Volume root, submit checks and host paths (see volumes.h).
#include "runtime/volumes.h"

#include <fmt/format.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/volume_mounts.h"
#include "runtime/submit_detail.h"
#include "spec/volume_paths.h"

namespace air::runtime {
namespace {

// The real path of `path`, or of its deepest existing ancestor with the rest appended.
std::string ResolveExisting(const std::string& path) {
  std::string head = path;
  std::string tail;
  while (!head.empty()) {
    char buf[PATH_MAX];
    if (::realpath(head.c_str(), buf) != nullptr) return std::string(buf) + tail;
    size_t slash = head.rfind('/');
    if (slash == std::string::npos) break;
    tail = head.substr(slash) + tail;
    head = head.substr(0, slash);
  }
  return path;
}

Status CheckWritable(const std::string& root, Env* env) {
  Status made = env->CreateDirs(root);
  if (!made.ok()) {
    return FailedPrecondition(
        fmt::format("the volume root {} cannot be created: {} (set volumes_root in "
                    "AIR_HOME/config.yaml, or AIR_VOLUMES_ROOT, to a writable "
                    "directory)",
                    root, made.message()));
  }
  std::string probe = root + "/.air-write-check-XXXXXX";
  int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return FailedPrecondition(fmt::format(
        "the volume root {} is not writable: {} (set volumes_root in AIR_HOME/config.yaml, or "
        "AIR_VOLUMES_ROOT, to a writable directory)",
        root, std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace

bool IsVolumePath(std::string_view path) {
  for (std::string_view prefix : {"/Volumes", "dbfs:/Volumes"}) {
    if (path.substr(0, prefix.size()) == prefix &&
        (path.size() == prefix.size() || path[prefix.size()] == '/')) {
      return true;
    }
  }
  return false;
}

Result<std::string> VolumesRoot(const Layout& layout, Env* env) {
  auto configured = env->GetEnv("AIR_VOLUMES_ROOT");
  if (!configured || configured->empty()) return layout.configured_volumes_root();
  std::string root = *configured;
  if (root[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) return ErrnoStatus("getcwd", errno);
    root = std::string(cwd) + "/" + root;
  }
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

Status CheckSpecVolumes(const spec::WorkloadSpec& spec, const std::string& root, Env* env) {
  std::vector<spec::VolumeReference> refs = spec::FindVolumeReferences(spec);
  if (refs.empty()) return Status::Ok();
  std::vector<spec::VolumeProblem> problems = spec::CheckVolumeReferences(spec);
  if (!problems.empty()) {
    return InvalidArgument(Where(spec, problems[0].field) + ": " + problems[0].message);
  }
  std::vector<std::vector<std::string>> volumes;
  for (const auto& ref : refs) {
    AIR_ASSIGN_OR_RETURN(std::vector<std::string> parts, spec::ParseVolumePath(ref.path));
    if (parts.size() < 3) continue;  // above the volumes: nothing to create
    parts.resize(3);
    volumes.push_back(std::move(parts));
  }
  Status writable = CheckWritable(root, env);
  if (!writable.ok()) {
    return Status(writable.code(),
                  fmt::format("{}: '{}' needs the volume root: {}", Where(spec, refs[0].field),
                              refs[0].path, writable.message()));
  }
  Status mountable = agent::ProbeVolumeNamespace(root);
  if (!mountable.ok()) {
    return FailedPrecondition(fmt::format(
        "{}: '{}' is a volume path, but this machine cannot show air's volumes at /Volumes: {}. "
        "air never writes volume data to the host's /Volumes; use a path outside /Volumes or "
        "run where mount namespaces are allowed",
        Where(spec, refs[0].field), refs[0].path, mountable.message()));
  }
  for (const auto& parts : volumes) {
    AIR_RETURN_IF_ERROR(env->CreateDirs(root + "/" + parts[0] + "/" + parts[1] + "/" + parts[2]));
  }
  return Status::Ok();
}

Result<std::string> RunVolumesRoot(const spec::WorkloadSpec& spec, const std::string& root,
                                   Env* env) {
  if (!spec::FindVolumeReferences(spec).empty()) {
    AIR_RETURN_IF_ERROR(CheckSpecVolumes(spec, root, env));
    return root;
  }
  if (!env->CreateDirs(root).ok()) return std::string();
  if (!agent::ProbeVolumeNamespace(root).ok()) return std::string();
  return root;
}

Result<std::string> HostPathOfVolume(std::string_view path, const std::string& root,
                                     size_t min_depth) {
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> parts, spec::ParseVolumePath(path));
  if (parts.size() < min_depth) {
    static const char* kNeeds[] = {"/Volumes", "/Volumes/<catalog>", "/Volumes/<catalog>/<schema>",
                                   "/Volumes/<catalog>/<schema>/<volume>"};
    return InvalidArgument(fmt::format("'{}' is too short here: give at least {}", path,
                                       kNeeds[std::min<size_t>(min_depth, 3)]));
  }
  std::string host = root;
  for (const auto& part : parts) host += "/" + part;
  if (parts.empty()) return host;
  // The parent must stay inside the root even through symlinks a node created.
  std::string parent = host.substr(0, host.rfind('/'));
  std::string real_root = ResolveExisting(root);
  std::string real_parent = ResolveExisting(parent);
  if (real_parent != real_root && real_parent.rfind(real_root + "/", 0) != 0) {
    return InvalidArgument(fmt::format(
        "'{}' leads outside the volume root {} (through a symbolic link to {}); refusing it", path,
        root, real_parent));
  }
  return host;
}

}  // namespace air::runtime
