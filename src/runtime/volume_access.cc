// Which way a run's nodes reach /Volumes (see volume_access.h).
#include "runtime/volume_access.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "spec/volume_paths.h"

namespace air::runtime {
namespace {

// Characters a root may have to replace /Volumes in a shell command or a YAML value without
// quoting: every other character could split a word or change its meaning.
bool IsRewritableChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("/._+@-").find(c) != std::string_view::npos;
}

// The first character of `root` that cannot be written in place of /Volumes, or '\0'.
char FirstUnrewritableChar(const std::string& root) {
  for (char c : root) {
    if (!IsRewritableChar(c)) return c;
  }
  return '\0';
}

// Whether `mount_point` (following a link) is the directory `root`.
bool IsSameDirectory(const std::string& mount_point, const std::string& root) {
  struct stat a {};
  struct stat b {};
  return ::stat(mount_point.c_str(), &a) == 0 && ::stat(root.c_str(), &b) == 0 &&
         S_ISDIR(a.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string Printable(char c) {
  if (c == ' ') return "a space";
  if (c >= 0x21 && c <= 0x7e) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", static_cast<unsigned char>(c));
}

}  // namespace

const char* VolumeAccessName(VolumeAccessKind kind) {
  switch (kind) {
    case VolumeAccessKind::kNone:
      return "none";
    case VolumeAccessKind::kHost:
      return "host";
    case VolumeAccessKind::kMount:
      return "mount";
    case VolumeAccessKind::kRewrite:
      return "rewrite";
  }
  return "none";
}

Result<VolumeAccess> DecideVolumeAccess(const spec::WorkloadSpec& spec, const std::string& root,
                                        const VolumeAccessOptions& options) {
  VolumeAccess access;
  access.root = root;
  access.required = !spec::FindVolumeReferences(spec).empty();
  if (IsSameDirectory(options.mount_point, root)) {
    access.kind = VolumeAccessKind::kHost;
    return access;
  }
  auto probe =
      agent::ProbeVolumeNamespace(root, {options.mount_point, /*may_create=*/!options.dry_run});
  if (probe.ok()) {
    access.kind = VolumeAccessKind::kMount;
    access.user_namespace = *probe == agent::VolumeNamespaceKind::kUserAndMount;
    return access;
  }
  access.why_no_mount = probe.status().message();
  if (!access.required) return access;  // kNone: nothing to show
  char bad = FirstUnrewritableChar(root);
  if (bad == '\0') {
    access.kind = VolumeAccessKind::kRewrite;
    return access;
  }
  return FailedPrecondition(fmt::format(
      "this machine cannot show air's volumes at {mp}: {why}; and the volume root {root} cannot "
      "stand in for {mp} in the spec's paths ({bad} is not one of the letters, digits and "
      "/._+@- a path may have there). Any of these makes it work: set AIR_VOLUMES_ROOT (or "
      "volumes_root in AIR_HOME/config.yaml) to a directory whose path has only those "
      "characters; have an administrator make {mp} the volume root (a link to it or a mount "
      "of it); or run where this user may create mount or user namespaces. air never writes "
      "volume data to the host's {mp}",
      fmt::arg("mp", options.mount_point), fmt::arg("why", access.why_no_mount),
      fmt::arg("root", root), fmt::arg("bad", Printable(bad))));
}

std::string DescribeVolumeAccess(const VolumeAccess& access) {
  switch (access.kind) {
    case VolumeAccessKind::kHost:
      return fmt::format("/Volumes on this machine is the volume root {}: nodes use it as it is",
                         access.root);
    case VolumeAccessKind::kMount:
      return fmt::format(
          "{} bind-mounted on /Volumes in a private mount namespace per node{}", access.root,
          access.user_namespace ? " (owned by a user namespace: this user is not root)" : "");
    case VolumeAccessKind::kRewrite:
      return fmt::format(
          "no mount namespace for this user ({}); the spec's /Volumes paths (command, "
          "env_variables, parameters) are rewritten to {}/...; a /Volumes path only in the "
          "code must use $AIR_VOLUMES_ROOT",
          access.why_no_mount, access.root);
    case VolumeAccessKind::kNone:
      break;
  }
  return fmt::format("the spec names no /Volumes path; nodes run without a mount ({})",
                     access.why_no_mount);
}

std::string RewriteVolumePaths(std::string_view text, const VolumeAccess& access) {
  if (access.kind != VolumeAccessKind::kRewrite) return std::string(text);
  const std::string_view prefix = spec::kVolumesPrefix;
  std::string out;
  size_t done = 0;
  for (const spec::TextSpan& span : spec::FindVolumePathSpans(text)) {
    size_t at = text.find(prefix, span.offset);  // after "dbfs:" when the path has it
    out.append(text.substr(done, at - done));
    out += access.root;
    done = at + prefix.size();
  }
  out.append(text.substr(done));
  return out;
}

spec::WorkloadSpec SpecForNodes(const spec::WorkloadSpec& spec, const VolumeAccess& access) {
  spec::WorkloadSpec out = spec;
  if (access.kind != VolumeAccessKind::kRewrite) return out;
  out.command = RewriteVolumePaths(spec.command, access);
  for (auto& [name, value] : out.env_variables) value = RewriteVolumePaths(value, access);
  if (out.parameters_yaml) out.parameters_yaml = RewriteVolumePaths(*out.parameters_yaml, access);
  return out;
}

}  // namespace air::runtime
