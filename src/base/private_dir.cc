// Creating and checking air's private directories (see private_dir.h).
#include "base/private_dir.h"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

namespace air {
namespace {

// "alice (uid 1001)", or "uid 1001" for a uid with no account.
std::string DescribeUser(uid_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) {
    return fmt::format("{} (uid {})", found->pw_name, uid);
  }
  return fmt::format("uid {}", uid);
}

std::string Named(const std::string& dir, const std::string& what) {
  return what.empty() ? dir : fmt::format("{} {}", what, dir);
}

Status Refuse(const std::string& dir, const std::string& what, const std::string& problem) {
  return PermissionDenied(fmt::format(
      "{} {}; air keeps private state there, so it must be a directory owned by you ({}) that "
      "group and others cannot write (e.g. mode 0700): use another path, or remove it and let "
      "air create it",
      Named(dir, what), problem, DescribeUser(::geteuid())));
}

Status CheckPrivate(const std::string& dir, Env* env, const std::string& what) {
  AIR_ASSIGN_OR_RETURN(PathInfo info, env->GetPathInfo(dir, /*follow_symlinks=*/false));
  const uid_t me = ::geteuid();
  if (info.type == PathInfo::Type::kSymlink) {
    if (info.owner != me && info.owner != 0) {
      return Refuse(dir, what, fmt::format("is a symlink owned by {}", DescribeUser(info.owner)));
    }
    AIR_ASSIGN_OR_RETURN(info, env->GetPathInfo(dir, /*follow_symlinks=*/true));
  }
  if (info.type != PathInfo::Type::kDirectory) {
    return FailedPrecondition(fmt::format("{} exists and is not a directory", Named(dir, what)));
  }
  if (info.owner != me) {
    return Refuse(dir, what,
                  fmt::format("belongs to {} (mode {:04o})", DescribeUser(info.owner),
                              static_cast<unsigned>(info.mode)));
  }
  if ((info.mode & 022) != 0) {
    return Refuse(dir, what,
                  fmt::format("is writable by {} (mode {:04o}), so another user may have put "
                              "files in it",
                              (info.mode & 002) != 0 ? "others" : "its group",
                              static_cast<unsigned>(info.mode)));
  }
  if ((info.mode & 077) != 0) {
    AIR_RETURN_IF_ERROR(env->ChangeMode(dir, info.mode & 07700));
  }
  return Status::Ok();
}

}  // namespace

Status MakePrivateDir(const std::string& dir, Env* env, const std::string& what) {
  auto existing = env->GetPathInfo(dir, /*follow_symlinks=*/false);
  if (!existing.ok()) {
    if (existing.status().code() != ErrorCode::kNotFound) return existing.status();
    AIR_RETURN_IF_ERROR(env->CreateDirs(dir, 0700));
  }
  return CheckPrivate(dir, env, what);
}

}  // namespace air
