// `air volumes ls [-r] [PATH] | cp [-r] [--overwrite] SRC DST | rm [-r] PATH`: the host's view
// of the volumes nodes see at /Volumes (docs/volumes.md), with the seed system's `fs` habits:
// PATH is `/Volumes/<catalog>/<schema>/<volume>/...` (or `dbfs:/Volumes/...`); cp copies
// between a local path and a volume path (either way, or volume to volume).
//
// Paths with `..` or invalid names are refused before anything is read or written, and every
// path is reached through base/rooted_dir.h: no symbolic link below the volume root (nodes and
// other users of a shared root can plant them), nor in a local tree being copied, is ever
// followed. ls shows a link as a link; cp and rm refuse a path through one; cp -r of a
// directory holding one names it and copies nothing. A copy is first written under a temporary
// name beside its destination and renamed into place, so a reader never sees half a file and a
// failed copy leaves nothing behind.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "base/private_dir.h"
#include "base/rooted_dir.h"
#include "base/time_format.h"
#include "cli/commands.h"
#include "cli/text_table.h"
#include "runtime/layout.h"
#include "runtime/volumes.h"

namespace air::cli {
namespace {

namespace fs = std::filesystem;

struct VolumesFlags {
  std::string path = "/Volumes";
  std::string source;
  std::string destination;
  bool recursive = false;
  bool overwrite = false;
};

Result<std::string> Root(CliContext& ctx) {
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(air_home, ctx.env));
  return runtime::VolumesRoot(layout, ctx.env);
}

std::string JoinPath(const std::string& base, const std::string& name) {
  std::string out = base;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out.empty() ? name : out + "/" + name;
}

std::string BaseName(const std::string& rel) { return rel.substr(rel.rfind('/') + 1); }

// A file or directory named on the command line: a RootedDir (the volume root, or a local
// path's parent directory) and the path below it.
struct Place {
  RootedDir dir;
  std::string rel;
  bool volume = false;
};

// A volume path (at least `min_depth` components) or a local one. A local path's parent is
// created when `create_parent`.
Result<Place> PlaceOf(CliContext& ctx, const std::string& path, const std::string& root,
                      size_t min_depth, bool create_parent) {
  if (runtime::IsVolumePath(path)) {
    AIR_ASSIGN_OR_RETURN(std::string rel, runtime::VolumeRelativePath(path, min_depth));
    if (create_parent) AIR_RETURN_IF_ERROR(ctx.env->CreateDirs(root));
    AIR_ASSIGN_OR_RETURN(RootedDir dir, RootedDir::Open(root, "/Volumes"));
    return Place{std::move(dir), rel, true};
  }
  std::string absolute = fs::absolute(path).lexically_normal().string();
  while (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  if (absolute == "/") return InvalidArgument("'/' cannot be copied to or from a volume");
  std::string parent = absolute.substr(0, absolute.rfind('/'));
  if (parent.empty()) parent = "/";
  if (create_parent) AIR_RETURN_IF_ERROR(ctx.env->CreateDirs(parent));
  AIR_ASSIGN_OR_RETURN(RootedDir dir, RootedDir::Open(parent, parent == "/" ? "" : parent));
  return Place{std::move(dir), BaseName(absolute), false};
}

nlohmann::json EntryJson(const std::string& volume_path, const std::string& rel,
                         const DirEntry& e) {
  return {{"name", rel},
          {"path", JoinPath(volume_path, rel)},
          {"type", DirEntryTypeName(e.type)},
          {"size", e.size},
          {"modified", e.modified_us > 0 ? FormatUtcTimestamp(e.modified_us, 0) : ""}};
}

DirEntry EntryOf(const std::string& name, const struct stat& st) {
  DirEntry e;
  e.name = name;
  e.type = S_ISREG(st.st_mode)   ? DirEntry::Type::kFile
           : S_ISDIR(st.st_mode) ? DirEntry::Type::kDirectory
           : S_ISLNK(st.st_mode) ? DirEntry::Type::kSymlink
                                 : DirEntry::Type::kOther;
  e.size = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  e.modified_us = int64_t{st.st_mtim.tv_sec} * 1'000'000 + st.st_mtim.tv_nsec / 1000;
  return e;
}

// Lists `dir_fd`, descending (with -r) into real directories only.
Status ListInto(int dir_fd, const std::string& volume_path, const std::string& prefix,
                bool recursive, nlohmann::json* entries) {
  AIR_ASSIGN_OR_RETURN(std::vector<DirEntry> listed,
                       ListDirAt(dir_fd, JoinPath(volume_path, prefix)));
  for (const DirEntry& e : listed) {
    std::string rel = prefix.empty() ? e.name : prefix + "/" + e.name;
    entries->push_back(EntryJson(volume_path, rel, e));
    if (!recursive || e.type != DirEntry::Type::kDirectory) continue;
    int child = ::openat(dir_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) continue;  // replaced by something else since it was listed
    Fd owned(child);
    AIR_RETURN_IF_ERROR(ListInto(child, volume_path, rel, true, entries));
  }
  return Status::Ok();
}

Status List(CliContext& ctx, const VolumesFlags& flags) {
  AIR_ASSIGN_OR_RETURN(std::string root, Root(ctx));
  AIR_ASSIGN_OR_RETURN(std::string rel, runtime::VolumeRelativePath(flags.path, 0));
  const bool top = rel.empty();
  nlohmann::json entries = nlohmann::json::array();
  auto dir = RootedDir::Open(root, "/Volumes");
  std::optional<struct stat> st;
  if (dir.ok()) {
    AIR_ASSIGN_OR_RETURN(st, dir->Lstat(rel));
  }
  if (!st) {
    if (top) {
      EmitData(ctx, {{"path", flags.path}, {"root", root}, {"entries", entries}},
               "No volumes yet (" + root + " is empty)");
      return Status::Ok();
    }
    return NotFound(
        fmt::format("{}: no such file or directory in the volumes (root {})", flags.path, root));
  }
  if (S_ISDIR(st->st_mode)) {
    AIR_ASSIGN_OR_RETURN(Fd listed, dir->OpenDir(rel, false));
    AIR_RETURN_IF_ERROR(ListInto(listed.get(), flags.path, "", flags.recursive, &entries));
  } else {  // a file, or a link shown as one and never followed
    std::string parent = flags.path.substr(0, flags.path.rfind('/'));
    entries.push_back(EntryJson(parent, BaseName(rel), EntryOf(BaseName(rel), *st)));
  }
  std::vector<std::vector<std::string>> rows = {{"PATH", "TYPE", "SIZE", "MODIFIED"}};
  for (const auto& e : entries) {
    rows.push_back({e["path"].get<std::string>(), e["type"].get<std::string>(),
                    e["type"] == "file" ? std::to_string(e["size"].get<uint64_t>()) : "-",
                    e["modified"].get<std::string>()});
  }
  EmitData(ctx, {{"path", flags.path}, {"root", root}, {"entries", entries}},
           entries.empty() ? flags.path + " is empty" : Table(rows));
  return Status::Ok();
}

// Every entry below `dir_fd` must be a file or a directory: a link (or a device, a socket) is
// named and nothing is copied.
Status CheckCopyable(int dir_fd, const std::string& shown) {
  AIR_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(dir_fd, shown));
  for (const DirEntry& e : entries) {
    std::string path = shown + "/" + e.name;
    if (e.type == DirEntry::Type::kSymlink || e.type == DirEntry::Type::kOther) {
      return InvalidArgument(fmt::format(
          "'{}' is {}; air volumes cp copies files and directories only, and never follows a "
          "link: nothing was copied",
          path, e.type == DirEntry::Type::kSymlink ? "a symbolic link" : "not a regular file"));
    }
    if (e.type != DirEntry::Type::kDirectory) continue;
    int child = ::openat(dir_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) return ErrnoStatus("open " + path, errno);
    Fd owned(child);
    AIR_RETURN_IF_ERROR(CheckCopyable(child, path));
  }
  return Status::Ok();
}

// Without --overwrite, no file of the source tree may exist in the target tree already.
Status CheckNoConflicts(int from_fd, int to_fd, const std::string& shown) {
  AIR_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(from_fd, shown));
  for (const DirEntry& e : entries) {
    struct stat st {};
    if (::fstatat(to_fd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    std::string path = shown + "/" + e.name;
    if (e.type != DirEntry::Type::kDirectory || !S_ISDIR(st.st_mode)) {
      return AlreadyExists(path + " already exists; pass --overwrite to replace it");
    }
    int from = ::openat(from_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int to = ::openat(to_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    Fd from_owned(from), to_owned(to);
    if (from < 0 || to < 0) return ErrnoStatus("open " + path, errno);
    AIR_RETURN_IF_ERROR(CheckNoConflicts(from, to, path));
  }
  return Status::Ok();
}

Status CopyBytes(int from_fd, PendingFile* to) {
  std::string buffer(1 << 20, '\0');
  while (true) {
    ssize_t n = ::read(from_fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", errno);
    if (n == 0) return Status::Ok();
    AIR_RETURN_IF_ERROR(to->Write(std::string_view(buffer.data(), static_cast<size_t>(n))));
  }
}

// Copies the tree below `from_fd` into the empty directory `to_fd`; returns the files copied.
Result<int64_t> CopyTreeInto(Env* env, int from_fd, int to_fd, const std::string& shown) {
  AIR_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(from_fd, shown));
  int64_t files = 0;
  for (const DirEntry& e : entries) {
    std::string path = shown + "/" + e.name;
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
    if (e.type == DirEntry::Type::kDirectory) flags |= O_DIRECTORY;
    int from = ::openat(from_fd, e.name.c_str(), flags);
    if (from < 0) return ErrnoStatus("open " + path, errno);
    Fd from_owned(from);
    struct stat st {};
    if (::fstat(from, &st) != 0) return ErrnoStatus("stat " + path, errno);
    if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(to_fd, e.name.c_str(), 0755) != 0) return ErrnoStatus("create " + path, errno);
      int to = ::openat(to_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (to < 0) return ErrnoStatus("open " + path, errno);
      Fd to_owned(to);
      AIR_ASSIGN_OR_RETURN(int64_t n, CopyTreeInto(env, from, to, path));
      files += n;
    } else if (S_ISREG(st.st_mode)) {
      AIR_ASSIGN_OR_RETURN(PendingFile out, PendingFile::Create(env, to_fd, e.name, 0644, path));
      AIR_RETURN_IF_ERROR(CopyBytes(from, &out));
      AIR_RETURN_IF_ERROR(out.Commit(/*replace=*/false));
      ++files;
    } else {
      return InvalidArgument(
          fmt::format("'{}' changed while it was copied; nothing was copied", path));
    }
  }
  return files;
}

// Moves the staged tree below `from_fd` into the existing directory `to_fd`, one rename per
// file (each file appears whole).
Status MoveInto(int from_fd, int to_fd, bool overwrite, const std::string& shown) {
  AIR_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(from_fd, shown));
  for (const DirEntry& e : entries) {
    std::string path = shown + "/" + e.name;
    if (e.type == DirEntry::Type::kDirectory) {
      if (::mkdirat(to_fd, e.name.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus("create " + path, errno);
      }
      int from = ::openat(from_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int to = ::openat(to_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      Fd from_owned(from), to_owned(to);
      if (from < 0 || to < 0) return ErrnoStatus("open " + path, errno);
      AIR_RETURN_IF_ERROR(MoveInto(from, to, overwrite, path));
      continue;
    }
    int rc = overwrite
                 ? ::renameat(from_fd, e.name.c_str(), to_fd, e.name.c_str())
                 : ::renameat2(from_fd, e.name.c_str(), to_fd, e.name.c_str(), RENAME_NOREPLACE);
    if (rc != 0) return ErrnoStatus("move into " + path, errno);
  }
  return Status::Ok();
}

// Copies the directory `from` to `leaf` in `parent`: staged in a temporary directory there,
// then renamed into place (a new target) or moved file by file into the existing one.
Result<int64_t> CopyDirectory(Env* env, int from, int parent, const std::string& leaf,
                              bool overwrite, const std::string& shown) {
  struct stat st {};
  const bool exists = ::fstatat(parent, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  Fd existing;
  if (exists) {
    if (!S_ISDIR(st.st_mode)) {
      return AlreadyExists(shown + " exists and is not a directory; remove it first");
    }
    existing = Fd(::openat(parent, leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!existing) return ErrnoStatus("open " + shown, errno);
    if (!overwrite) AIR_RETURN_IF_ERROR(CheckNoConflicts(from, existing.get(), shown));
  }
  AIR_ASSIGN_OR_RETURN(std::string staging, CreateTempDirAt(parent, leaf, shown));
  auto discard = [&] { (void)RemoveAt(parent, staging, /*recursive=*/true, shown); };
  int staged = ::openat(parent, staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (staged < 0) {
    int err = errno;
    discard();
    return ErrnoStatus("open the staging directory of " + shown, err);
  }
  Fd staged_owned(staged);
  if (::fchmod(staged, 0755) != 0) {
    int err = errno;
    discard();
    return ErrnoStatus("chmod " + shown, err);
  }
  auto files = CopyTreeInto(env, from, staged, shown);
  Status placed = files.status();
  if (placed.ok() && exists) {
    placed = MoveInto(staged, existing.get(), overwrite, shown);
    discard();  // what was staged is in place now (or, on an error, never will be)
  } else if (placed.ok() &&
             ::renameat2(parent, staging.c_str(), parent, leaf.c_str(), RENAME_NOREPLACE) != 0) {
    placed = ErrnoStatus("rename into " + shown, errno);
  }
  if (!placed.ok()) {
    discard();
    return placed;
  }
  return files;
}

Status Copy(CliContext& ctx, const VolumesFlags& flags) {
  if (!runtime::IsVolumePath(flags.source) && !runtime::IsVolumePath(flags.destination)) {
    return InvalidArgument(
        fmt::format("neither '{}' nor '{}' is a volume path; one side of air volumes cp must be "
                    "/Volumes/<catalog>/<schema>/<volume>/...",
                    flags.source, flags.destination));
  }
  AIR_ASSIGN_OR_RETURN(std::string root, Root(ctx));
  AIR_ASSIGN_OR_RETURN(Place from, PlaceOf(ctx, flags.source, root, 4, false));
  // The source: a file or (with -r) a directory, reached without a link.
  AIR_ASSIGN_OR_RETURN(std::optional<struct stat> source, from.dir.Lstat(from.rel));
  if (!source) return NotFound(flags.source + ": no such file or directory");
  if (S_ISLNK(source->st_mode)) {
    return InvalidArgument(flags.source +
                           " is a symbolic link; air volumes cp copies files and directories "
                           "only, and never follows a link");
  }
  const bool directory = S_ISDIR(source->st_mode);
  if (directory && !flags.recursive) {
    return InvalidArgument(flags.source + " is a directory; pass -r to copy it");
  }
  if (!directory && !S_ISREG(source->st_mode)) {
    return InvalidArgument(flags.source + " is not a regular file");
  }
  // The whole source is checked before anything is created.
  Fd source_fd;
  if (directory) {
    AIR_ASSIGN_OR_RETURN(source_fd, from.dir.OpenDir(from.rel, false));
    AIR_RETURN_IF_ERROR(CheckCopyable(source_fd.get(), flags.source));
  } else {
    AIR_ASSIGN_OR_RETURN(source_fd, from.dir.OpenFileForRead(from.rel));
  }
  if (runtime::IsVolumePath(flags.destination)) {
    AIR_RETURN_IF_ERROR(runtime::VolumeRelativePath(flags.destination, 3).status());
  }
  // AIR_HOME itself is private to the user (the volume root is usually below it).
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_RETURN_IF_ERROR(MakePrivateDir(air_home, ctx.env, "AIR_HOME"));
  AIR_ASSIGN_OR_RETURN(Place to, PlaceOf(ctx, flags.destination, root, 3, true));
  // The target: DST, or DST/<source name> when DST is a folder: an existing directory, a
  // volume itself (/Volumes/c/s/v, created when missing) or a path ending in '/'.
  std::string target = to.rel;
  std::string target_name = flags.destination;
  AIR_ASSIGN_OR_RETURN(std::optional<struct stat> dest, to.dir.Lstat(to.rel));
  if (dest && S_ISLNK(dest->st_mode)) {
    return InvalidArgument(flags.destination +
                           " is a symbolic link; air volumes cp never writes through a link");
  }
  const bool names_folder = (!flags.destination.empty() && flags.destination.back() == '/') ||
                            (to.volume && std::count(to.rel.begin(), to.rel.end(), '/') == 2);
  if (names_folder && dest && !S_ISDIR(dest->st_mode)) {
    return InvalidArgument(flags.destination + " is a file, not a folder to copy into");
  }
  if (names_folder || (dest && S_ISDIR(dest->st_mode))) {
    target = JoinPath(to.rel, BaseName(from.rel));
    target_name = JoinPath(flags.destination, BaseName(from.rel));
  }
  if (to.volume) AIR_RETURN_IF_ERROR(runtime::VolumeRelativePath(target_name, 4).status());
  std::string leaf;
  AIR_ASSIGN_OR_RETURN(Fd parent, to.dir.OpenParent(target, /*create=*/true, &leaf));
  int64_t files = 0;
  if (directory) {
    AIR_ASSIGN_OR_RETURN(files, CopyDirectory(ctx.env, source_fd.get(), parent.get(), leaf,
                                              flags.overwrite, target_name));
  } else {
    const Fd& file = source_fd;
    struct stat existing {};
    if (::fstatat(parent.get(), leaf.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(existing.st_mode)) {
      return AlreadyExists(target_name + " is a directory");
    }
    AIR_ASSIGN_OR_RETURN(PendingFile out,
                         PendingFile::Create(ctx.env, parent.get(), leaf, 0644, target_name));
    AIR_RETURN_IF_ERROR(CopyBytes(file.get(), &out));
    Status committed = out.Commit(flags.overwrite);
    if (committed.code() == ErrorCode::kAlreadyExists) {
      return AlreadyExists(target_name + " already exists; pass --overwrite to replace it");
    }
    AIR_RETURN_IF_ERROR(committed);
    files = 1;
  }
  EmitData(ctx, {{"source", flags.source}, {"destination", target_name}, {"files", files}},
           fmt::format("Copied {} to {} ({} file{})", flags.source, target_name, files,
                       files == 1 ? "" : "s"));
  return Status::Ok();
}

Status Remove(CliContext& ctx, const VolumesFlags& flags) {
  AIR_ASSIGN_OR_RETURN(std::string root, Root(ctx));
  AIR_ASSIGN_OR_RETURN(std::string rel,
                       runtime::VolumeRelativePath(flags.path, flags.recursive ? 3 : 4));
  auto dir = RootedDir::Open(root, "/Volumes");
  if (!dir.ok()) return NotFound(flags.path + ": no such file or directory in the volumes");
  AIR_ASSIGN_OR_RETURN(std::optional<struct stat> st, dir->Lstat(rel));
  if (!st) return NotFound(flags.path + ": no such file or directory in the volumes");
  std::string leaf;
  AIR_ASSIGN_OR_RETURN(Fd parent, dir->OpenParent(rel, false, &leaf));
  auto removed = RemoveAt(parent.get(), leaf, flags.recursive, dir->Shown(rel));
  if (!removed.ok()) {
    if (removed.status().message().find("not empty") != std::string::npos) {
      return InvalidArgument(flags.path +
                             " is a directory that is not empty; pass -r to remove it and "
                             "everything in it");
    }
    return removed.status();
  }
  EmitData(
      ctx, {{"path", flags.path}, {"removed", *removed}},
      fmt::format("Removed {} ({} entr{})", flags.path, *removed, *removed == 1 ? "y" : "ies"));
  return Status::Ok();
}

}  // namespace

void RegisterVolumesCommand(CLI::App& root, CliContext& ctx) {
  auto* group = root.add_subcommand(
      "volumes", "list, copy and remove files of the volumes nodes see at /Volumes");
  group->require_subcommand(1);
  group->fallthrough();
  auto flags = std::make_shared<VolumesFlags>();
  auto run = [&ctx, flags](Status (*command)(CliContext&, const VolumesFlags&)) {
    return [&ctx, flags, command] {
      if (Status status = command(ctx, *flags); !status.ok()) EmitError(ctx, status);
    };
  };

  auto* ls = group->add_subcommand("ls", "list a volume directory (default /Volumes)");
  ls->add_option("PATH", flags->path, "/Volumes/<catalog>/<schema>/<volume>/...");
  ls->add_flag("-r,--recursive", flags->recursive, "list everything below PATH");
  ls->fallthrough();
  ls->callback(run(List));

  auto* cp = group->add_subcommand("cp", "copy between a local path and a volume path");
  cp->add_option("SRC", flags->source, "local path or /Volumes/...")->required();
  cp->add_option("DST", flags->destination, "local path or /Volumes/...")->required();
  cp->add_flag("-r,--recursive", flags->recursive, "copy a directory and everything in it");
  cp->add_flag("--overwrite", flags->overwrite, "replace files that already exist");
  cp->fallthrough();
  cp->callback(run(Copy));

  auto* rm = group->add_subcommand("rm", "remove a file (or, with -r, a directory) of a volume");
  rm->add_option("PATH", flags->path, "/Volumes/<catalog>/<schema>/<volume>/...")->required();
  rm->add_flag("-r,--recursive", flags->recursive, "remove a directory and everything in it");
  rm->fallthrough();
  rm->callback(run(Remove));
}

}  // namespace air::cli
