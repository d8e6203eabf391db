// `air volumes ls [-r] [PATH] | cp [-r] [--overwrite] SRC DST | rm [-r] PATH`: the host's view
// of the volumes nodes see at /Volumes (docs/volumes.md), with the seed system's `fs` habits:
// PATH is `/Volumes/<catalog>/<schema>/<volume>/...` (or `dbfs:/Volumes/...`); cp copies
// between a local path and a volume path (either way, or volume to volume). Paths with `..`,
// invalid names or a symlink leading out of the volume root are refused before anything is read
// or written. Copies go to a temporary name first and are renamed into place, so a reader never
// sees half a file.
#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include "base/atomic_file.h"
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
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(AirHome(ctx), ctx.env));
  return runtime::VolumesRoot(layout, ctx.env);
}

std::string Join(const std::string& volume_path, const std::string& name) {
  std::string out = volume_path;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out + "/" + name;
}

Status FromError(const std::error_code& ec, const std::string& what) {
  return ErrnoStatus(what, ec.value());
}

nlohmann::json Entry(const std::string& volume_path, const std::string& name,
                     const std::string& host) {
  struct stat st {};
  bool ok = ::lstat(host.c_str(), &st) == 0;
  std::string type = !ok                   ? "unknown"
                     : S_ISDIR(st.st_mode) ? "directory"
                     : S_ISLNK(st.st_mode) ? "symlink"
                                           : "file";
  int64_t modified_us = ok ? int64_t{st.st_mtim.tv_sec} * 1'000'000 + st.st_mtim.tv_nsec / 1000 : 0;
  return {{"name", name},
          {"path", Join(volume_path, name)},
          {"type", type},
          {"size", ok && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : 0},
          {"modified", modified_us > 0 ? FormatUtcTimestamp(modified_us, 0) : ""}};
}

void ListInto(CliContext& ctx, const std::string& volume_path, const std::string& host,
              const std::string& prefix, bool recursive, nlohmann::json* entries) {
  auto names = ctx.env->ListDir(host);
  if (!names.ok()) return;
  for (const auto& name : *names) {
    std::string rel = prefix.empty() ? name : prefix + "/" + name;
    nlohmann::json entry = Entry(volume_path, rel, host + "/" + name);
    bool dir = entry["type"] == "directory";
    entries->push_back(std::move(entry));
    if (recursive && dir) ListInto(ctx, volume_path, host + "/" + name, rel, true, entries);
  }
}

void List(CliContext& ctx, const VolumesFlags& flags) {
  auto root = Root(ctx);
  if (!root.ok()) return EmitError(ctx, root.status());
  auto host = runtime::HostPathOfVolume(flags.path, *root, 0);
  if (!host.ok()) return EmitError(ctx, host.status());
  nlohmann::json entries = nlohmann::json::array();
  if (!ctx.env->IsDirectory(*host)) {
    if (!ctx.env->FileExists(*host)) {
      if (flags.path == "/Volumes" || flags.path == "/Volumes/") {
        return EmitData(ctx, {{"path", flags.path}, {"root", *root}, {"entries", entries}},
                        "No volumes yet (" + *root + " is empty)");
      }
      return EmitError(ctx, NotFound(fmt::format("{}: no such file or directory in the volumes "
                                                 "(root {})",
                                                 flags.path, *root)));
    }
    std::string name = flags.path.substr(flags.path.rfind('/') + 1);
    nlohmann::json entry = Entry(flags.path.substr(0, flags.path.rfind('/')), name, *host);
    entries.push_back(entry);
  } else {
    ListInto(ctx, flags.path, *host, "", flags.recursive, &entries);
  }
  std::vector<std::vector<std::string>> rows = {{"PATH", "TYPE", "SIZE", "MODIFIED"}};
  for (const auto& e : entries) {
    rows.push_back({e["path"].get<std::string>(), e["type"].get<std::string>(),
                    e["type"] == "file" ? std::to_string(e["size"].get<int64_t>()) : "-",
                    e["modified"].get<std::string>()});
  }
  EmitData(ctx, {{"path", flags.path}, {"root", *root}, {"entries", entries}},
           entries.empty() ? flags.path + " is empty" : Table(rows));
}

// A local or volume path as a host path; volume destinations get their volume directory.
Result<std::string> HostPath(const std::string& path, const std::string& root, size_t min_depth) {
  if (!runtime::IsVolumePath(path)) return fs::absolute(path).lexically_normal().string();
  return runtime::HostPathOfVolume(path, root, min_depth);
}

// Copies one regular file through a temporary name in the destination directory
// (base/atomic_file.h), keeping its permission bits.
Status CopyFile(const std::string& from, const std::string& to, Env* env) {
  struct stat st;
  if (::stat(from.c_str(), &st) != 0) return ErrnoStatus("stat " + from, errno);
  AtomicFileWriter writer(env, to, st.st_mode & 07777);
  AIR_RETURN_IF_ERROR(writer.Open());
  AIR_RETURN_IF_ERROR(writer.AppendFileContents(from));
  return writer.Commit();
}

Result<int64_t> CopyTree(const std::string& from, const std::string& to, bool overwrite, Env* env) {
  std::error_code ec;
  if (fs::is_symlink(from, ec)) {
    return InvalidArgument(from +
                           " is a symbolic link; air volumes cp copies files and "
                           "directories only");
  }
  if (fs::is_directory(from, ec)) {
    fs::create_directories(to, ec);
    if (ec) return FromError(ec, "create " + to);
    int64_t files = 0;
    for (const auto& child : fs::directory_iterator(from, ec)) {
      AIR_ASSIGN_OR_RETURN(
          int64_t n, CopyTree(child.path().string(), to + "/" + child.path().filename().string(),
                              overwrite, env));
      files += n;
    }
    if (ec) return FromError(ec, "read " + from);
    return files;
  }
  if (!overwrite && fs::exists(to, ec)) {
    return AlreadyExists(to + " already exists; pass --overwrite to replace it");
  }
  AIR_RETURN_IF_ERROR(CopyFile(from, to, env));
  return int64_t{1};
}

void Copy(CliContext& ctx, const VolumesFlags& flags) {
  if (!runtime::IsVolumePath(flags.source) && !runtime::IsVolumePath(flags.destination)) {
    return EmitError(ctx, InvalidArgument(fmt::format(
                              "neither '{}' nor '{}' is a volume path; one side of air volumes "
                              "cp must be /Volumes/<catalog>/<schema>/<volume>/...",
                              flags.source, flags.destination)));
  }
  auto root = Root(ctx);
  if (!root.ok()) return EmitError(ctx, root.status());
  auto from = HostPath(flags.source, *root, 4);
  if (!from.ok()) return EmitError(ctx, from.status());
  auto to = HostPath(flags.destination, *root, 3);
  if (!to.ok()) return EmitError(ctx, to.status());
  std::error_code ec;
  if (!fs::exists(*from, ec)) {
    return EmitError(ctx, NotFound(flags.source + ": no such file or directory"));
  }
  if (fs::is_directory(*from, ec) && !flags.recursive) {
    return EmitError(ctx, InvalidArgument(flags.source + " is a directory; pass -r to copy it"));
  }
  std::string target = *to;
  std::string target_name = flags.destination;
  if (fs::is_directory(*to, ec)) {
    std::string name = fs::path(*from).filename().string();
    target_name = Join(flags.destination, name);
    auto joined = HostPath(target_name, *root, 4);
    if (!joined.ok()) return EmitError(ctx, joined.status());
    target = *joined;
  } else if (runtime::IsVolumePath(flags.destination)) {
    auto parts_ok = runtime::HostPathOfVolume(flags.destination, *root, 4);
    if (!parts_ok.ok()) return EmitError(ctx, parts_ok.status());
  }
  // AIR_HOME itself is private to the user (the volume root is usually below it).
  if (Status home = ctx.env->CreateDirs(AirHome(ctx), 0700); !home.ok()) {
    return EmitError(ctx, home);
  }
  fs::create_directories(fs::path(target).parent_path(), ec);
  if (ec) return EmitError(ctx, FromError(ec, "create the directory of " + target_name));
  auto files = CopyTree(*from, target, flags.overwrite, ctx.env);
  if (!files.ok()) return EmitError(ctx, files.status());
  EmitData(ctx, {{"source", flags.source}, {"destination", target_name}, {"files", *files}},
           fmt::format("Copied {} to {} ({} file{})", flags.source, target_name, *files,
                       *files == 1 ? "" : "s"));
}

void Remove(CliContext& ctx, const VolumesFlags& flags) {
  auto root = Root(ctx);
  if (!root.ok()) return EmitError(ctx, root.status());
  auto host = runtime::HostPathOfVolume(flags.path, *root, flags.recursive ? 3 : 4);
  if (!host.ok()) return EmitError(ctx, host.status());
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(*host, ec))) {
    return EmitError(ctx, NotFound(flags.path + ": no such file or directory in the volumes"));
  }
  if (fs::is_directory(fs::symlink_status(*host, ec)) && !flags.recursive &&
      !fs::is_empty(*host, ec)) {
    return EmitError(
        ctx, InvalidArgument(flags.path + " is a directory that is not empty; pass -r to remove "
                                          "it and everything in it"));
  }
  std::uintmax_t removed = fs::remove_all(*host, ec);
  if (ec) return EmitError(ctx, FromError(ec, "remove " + flags.path));
  EmitData(ctx, {{"path", flags.path}, {"removed", removed}},
           fmt::format("Removed {} ({} entr{})", flags.path, removed, removed == 1 ? "y" : "ies"));
}

}  // namespace

void RegisterVolumesCommand(CLI::App& root, CliContext& ctx) {
  auto* group = root.add_subcommand(
      "volumes", "list, copy and remove files of the volumes nodes see at /Volumes");
  group->require_subcommand(1);
  group->fallthrough();
  auto flags = std::make_shared<VolumesFlags>();

  auto* ls = group->add_subcommand("ls", "list a volume directory (default /Volumes)");
  ls->add_option("PATH", flags->path, "/Volumes/<catalog>/<schema>/<volume>/...");
  ls->add_flag("-r,--recursive", flags->recursive, "list everything below PATH");
  ls->fallthrough();
  ls->callback([&ctx, flags] { List(ctx, *flags); });

  auto* cp = group->add_subcommand("cp", "copy between a local path and a volume path");
  cp->add_option("SRC", flags->source, "local path or /Volumes/...")->required();
  cp->add_option("DST", flags->destination, "local path or /Volumes/...")->required();
  cp->add_flag("-r,--recursive", flags->recursive, "copy a directory and everything in it");
  cp->add_flag("--overwrite", flags->overwrite, "replace files that already exist");
  cp->fallthrough();
  cp->callback([&ctx, flags] { Copy(ctx, *flags); });

  auto* rm = group->add_subcommand("rm", "remove a file (or, with -r, a directory) of a volume");
  rm->add_option("PATH", flags->path, "/Volumes/<catalog>/<schema>/<volume>/...")->required();
  rm->add_flag("-r,--recursive", flags->recursive, "remove a directory and everything in it");
  rm->fallthrough();
  rm->callback([&ctx, flags] { Remove(ctx, *flags); });
}

}  // namespace air::cli
