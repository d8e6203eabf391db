// Volume root, submit checks and host paths (see volumes.h).
#include "runtime/volumes.h"

#include <fmt/format.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/rooted_dir.h"
#include "runtime/submit_detail.h"
#include "spec/volume_paths.h"

namespace air::runtime {
namespace {

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

Result<VolumeAccess> CheckSpecVolumes(const spec::WorkloadSpec& spec, const std::string& root,
                                      Env* env) {
  std::vector<spec::VolumeReference> refs = spec::FindVolumeReferences(spec);
  if (refs.empty()) return VolumeAccess{};
  std::vector<spec::VolumeProblem> problems = spec::CheckVolumeReferences(spec);
  if (!problems.empty()) {
    return InvalidArgument(Where(spec, problems[0].field) + ": " + problems[0].message);
  }
  AIR_RETURN_IF_ERROR(CheckVolumeLinks(spec, root));
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
  auto access = DecideVolumeAccess(spec, root);
  if (!access.ok()) {
    return Status(access.status().code(),
                  fmt::format("{}: '{}' is a volume path, but {}", Where(spec, refs[0].field),
                              refs[0].path, access.status().message()));
  }
  for (const auto& parts : volumes) {
    AIR_RETURN_IF_ERROR(env->CreateDirs(root + "/" + parts[0] + "/" + parts[1] + "/" + parts[2]));
  }
  return access;
}

Result<VolumeAccess> RunVolumeAccess(const spec::WorkloadSpec& spec, const std::string& root,
                                     Env* env) {
  if (!spec::FindVolumeReferences(spec).empty()) return CheckSpecVolumes(spec, root, env);
  Status made = env->CreateDirs(root);
  if (!made.ok()) {
    VolumeAccess none;
    none.root = root;
    none.why_no_mount = made.message();
    return none;
  }
  return DecideVolumeAccess(spec, root);
}

Status CheckVolumeLinks(const spec::WorkloadSpec& spec, const std::string& root) {
  std::vector<spec::VolumeReference> refs = spec::FindVolumeReferences(spec);
  if (refs.empty()) return Status::Ok();
  auto dir = RootedDir::Open(root, "/Volumes");
  if (!dir.ok()) return Status::Ok();  // no root yet: nothing below it to follow
  for (const auto& ref : refs) {
    auto parts = spec::ParseVolumePath(ref.path);
    if (!parts.ok()) continue;  // reported by CheckVolumeReferences
    std::string rel;
    for (const std::string& part : *parts) {
      rel = rel.empty() ? part : rel + "/" + part;
      auto st = dir->Lstat(rel);
      if (!st.ok() || !*st) break;  // missing from here on (a link above it is refused below)
      if (S_ISLNK((*st)->st_mode)) {
        return InvalidArgument(fmt::format(
            "{}: '{}' leads through the symbolic link /Volumes/{} (under the volume root {}); air "
            "refuses links in volume paths, since one could send a node's writes outside the "
            "volumes",
            Where(spec, ref.field), ref.path, rel, root));
      }
      if (!S_ISDIR((*st)->st_mode)) break;
    }
  }
  return Status::Ok();
}

Result<std::string> VolumeRelativePath(std::string_view path, size_t min_depth) {
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> parts, spec::ParseVolumePath(path));
  if (parts.size() < min_depth) {
    static const char* kNeeds[] = {"/Volumes", "/Volumes/<catalog>", "/Volumes/<catalog>/<schema>",
                                   "/Volumes/<catalog>/<schema>/<volume>"};
    return InvalidArgument(fmt::format("'{}' is too short here: give at least {}", path,
                                       kNeeds[std::min<size_t>(min_depth, 3)]));
  }
  std::string rel;
  for (const auto& part : parts) rel += (rel.empty() ? "" : "/") + part;
  return rel;
}

}  // namespace air::runtime
