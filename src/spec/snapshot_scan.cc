// Listing the files of a code snapshot (see snapshot_scan.h).
#include "spec/snapshot_scan.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "base/strings.h"
#include "spec/git_tree.h"
#include "spec/gitignore.h"

namespace air::spec {
namespace {

struct IncludeFilter {
  std::vector<std::string> paths;  // normalized; empty = everything

  bool Inside(const std::string& rel) const {
    if (paths.empty()) return true;
    return std::any_of(paths.begin(), paths.end(), [&](const std::string& p) {
      return rel == p ||
             (rel.size() > p.size() && rel.compare(0, p.size(), p) == 0 && rel[p.size()] == '/');
    });
  }
  bool AncestorOfSome(const std::string& rel) const {
    return std::any_of(paths.begin(), paths.end(), [&](const std::string& p) {
      return p.size() > rel.size() && p.compare(0, rel.size(), rel) == 0 && p[rel.size()] == '/';
    });
  }
};

IncludeFilter MakeFilter(const SnapshotSpec& snapshot) {
  IncludeFilter filter;
  for (std::string p : snapshot.include_paths) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (p == "." || p.empty()) return IncludeFilter{};  // the whole root
    if (p.compare(0, 2, "./") == 0) p.erase(0, 2);
    filter.paths.push_back(p);
  }
  return filter;
}

class TreeWalker {
 public:
  TreeWalker(std::string root, const IncludeFilter& filter, Env* env, SnapshotListing* listing)
      : root_(std::move(root)), filter_(filter), env_(env), listing_(listing) {}

  // A directory (identified by device and inode, so any spelling of its path matches) that is
  // never entered.
  void Exclude(const std::string& dir) {
    struct stat st;
    if (!dir.empty() && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      excluded_.emplace_back(st.st_dev, st.st_ino);
    }
  }

  Status Walk(const std::string& dir) {
    std::string abs = dir.empty() ? root_ : root_ + "/" + dir;
    std::string ignore_file = abs + "/.gitignore";
    struct stat st;
    if (::lstat(ignore_file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      AIR_ASSIGN_OR_RETURN(std::string content, env_->ReadFile(ignore_file));
      rules_.AddFile(dir, content);
    }
    AIR_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(abs));
    for (const std::string& name : names) {
      if (name == ".git") continue;
      std::string rel = dir.empty() ? name : dir + "/" + name;
      std::string path = abs + "/" + name;
      if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path, errno);
      bool is_dir = S_ISDIR(st.st_mode);
      bool inside = filter_.Inside(rel);
      if (!inside && !(is_dir && filter_.AncestorOfSome(rel))) continue;
      if (rules_.IsIgnored(rel, is_dir)) {
        ++listing_->ignored_entries;
        continue;
      }
      if (is_dir && IsExcluded(st)) continue;
      if (is_dir && (name == "__pycache__" || IsVirtualenv(path))) {
        listing_->skipped_dirs.push_back(rel);
        continue;
      }
      if (is_dir) {
        AIR_RETURN_IF_ERROR(Walk(rel));
      } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
        SnapshotFile file;
        file.path = rel;
        file.size = static_cast<uint64_t>(st.st_size);
        file.is_symlink = S_ISLNK(st.st_mode);
        file.mode = file.is_symlink ? 0777 : (st.st_mode & 07777);
        listing_->files.push_back(std::move(file));
      }
    }
    return Status::Ok();
  }

 private:
  // A Python virtualenv (python -m venv, virtualenv, uv, poetry): its root holds pyvenv.cfg.
  static bool IsVirtualenv(const std::string& dir) {
    struct stat st;
    return ::lstat((dir + "/pyvenv.cfg").c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }

  bool IsExcluded(const struct stat& st) const {
    return std::find(excluded_.begin(), excluded_.end(), std::make_pair(st.st_dev, st.st_ino)) !=
           excluded_.end();
  }

  std::string root_;
  std::vector<std::pair<dev_t, ino_t>> excluded_;
  const IncludeFilter& filter_;
  Env* env_;
  SnapshotListing* listing_;
  GitignoreRules rules_;
};

// Lexical components of `path` with "." dropped and ".." applied; false when ".." climbs above
// the start.
bool Normalize(const std::string& path, std::vector<std::string>* parts) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    start = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (parts->empty()) return false;
      parts->pop_back();
    } else {
      parts->push_back(part);
    }
  }
  return true;
}

// "data/ 1.9 GiB, model.bin 300.0 MiB (largest files: data/a.bin 1.2 GiB, ...)": the `count`
// largest top-level entries (a directory with the size of everything listed below it), then the
// largest files, largest first.
std::string LargestEntries(const SnapshotListing& listing, size_t count) {
  std::map<std::string, uint64_t> sizes;
  for (const SnapshotFile& f : listing.files) {
    const size_t slash = f.path.find('/');
    sizes[slash == std::string::npos ? f.path : f.path.substr(0, slash + 1)] += f.size;
  }
  auto largest = [count](std::vector<std::pair<std::string, uint64_t>> entries) {
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    std::vector<std::string> out;
    for (size_t i = 0; i < entries.size() && i < count; ++i) {
      out.push_back(fmt::format("{} {}", entries[i].first, HumanBytes(entries[i].second)));
    }
    return Join(out, ", ");
  };
  std::vector<std::pair<std::string, uint64_t>> files;
  for (const SnapshotFile& f : listing.files) files.emplace_back(f.path, f.size);
  return fmt::format("{} (largest files: {})", largest({sizes.begin(), sizes.end()}),
                     largest(std::move(files)));
}

}  // namespace

bool IsContainedRelativePath(std::string_view path) {
  if (path.empty() || path[0] == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

Result<std::string> ContainedLinkTarget(const std::string& link_path, const std::string& target,
                                        const std::string& root) {
  std::vector<std::string> link_dir;
  if (!Normalize(link_path, &link_dir)) return InvalidArgument("bad link path " + link_path);
  link_dir.pop_back();  // the link itself
  std::vector<std::string> resolved;
  bool inside = false;
  if (!target.empty() && target[0] == '/') {
    std::string base = root;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    if (target.compare(0, base.size() + 1, base + "/") == 0 || target == base) {
      inside = Normalize(target.substr(std::min(target.size(), base.size() + 1)), &resolved);
    }
  } else if (!target.empty()) {
    resolved = link_dir;
    inside = Normalize(target, &resolved);
  }
  if (!inside) {
    return InvalidArgument(fmt::format(
        "the symbolic link {} points at {}, outside root_path {}: its target would not travel "
        "with the snapshot; copy the file into the tree, or leave the link out with .gitignore "
        "or include_paths",
        link_path, target, root));
  }
  if (target[0] != '/') return target;
  // Relative to the link's directory: "../" for each level up, then the rest.
  size_t common = 0;
  while (common < link_dir.size() && common < resolved.size() &&
         link_dir[common] == resolved[common]) {
    ++common;
  }
  std::vector<std::string> steps(link_dir.size() - common, "..");
  steps.insert(steps.end(), resolved.begin() + static_cast<long>(common), resolved.end());
  std::string out = steps.empty() ? std::string(".") : Join(steps, "/");
  return out;
}

Result<SnapshotListing> ScanSnapshot(const SnapshotSpec& snapshot, Env* env,
                                     std::string* error_field, const std::string& air_home) {
  std::string unused;
  if (!error_field) error_field = &unused;
  const std::string prefix = "code_source.snapshot.";
  auto include_field = [&](const std::string& p) {
    auto it = std::find(snapshot.include_paths.begin(), snapshot.include_paths.end(), p);
    size_t index = static_cast<size_t>(it - snapshot.include_paths.begin());
    return fmt::format("{}include_paths[{}]", prefix, index);
  };
  SnapshotListing listing;
  listing.root = snapshot.resolved_root;
  if (!env->IsDirectory(listing.root)) {
    *error_field = prefix + "root_path";
    return InvalidArgument(fmt::format("root_path {} is not an existing directory", listing.root));
  }
  IncludeFilter filter = MakeFilter(snapshot);
  if (snapshot.git) {
    Result<std::string> revision = ResolveGitRevision(listing.root, *snapshot.git);
    if (!revision.ok()) {
      *error_field = prefix + (snapshot.git->commit ? "git.commit" : "git.branch");
      return revision.status();
    }
    listing.revision = *revision;
    AIR_ASSIGN_OR_RETURN(std::vector<SnapshotFile> files,
                         ListGitTree(listing.root, listing.revision));
    for (auto& file : files) {
      if (filter.Inside(file.path)) listing.files.push_back(std::move(file));
    }
  } else {
    for (const std::string& p : filter.paths) {
      struct stat st;
      if (::lstat((listing.root + "/" + p).c_str(), &st) != 0) {
        *error_field = include_field(p);
        return InvalidArgument(
            fmt::format("include path '{}' does not exist under {}", p, listing.root));
      }
    }
    TreeWalker walker(listing.root, filter, env, &listing);
    walker.Exclude(air_home);
    AIR_RETURN_IF_ERROR(walker.Walk(""));
  }
  for (const std::string& p : filter.paths) {
    IncludeFilter one{{p}};
    if (std::none_of(listing.files.begin(), listing.files.end(),
                     [&](const SnapshotFile& f) { return one.Inside(f.path); })) {
      *error_field = include_field(p);
      return InvalidArgument(
          listing.revision.empty()
              ? fmt::format("include path '{}' has no files under {} (it is empty, or "
                            ".gitignore excludes everything in it); list paths that hold files",
                            p, listing.root)
              : fmt::format("include path '{}' has no files in revision {} below {}", p,
                            listing.revision.substr(0, 12), listing.root));
    }
  }
  std::sort(listing.files.begin(), listing.files.end(),
            [](const SnapshotFile& a, const SnapshotFile& b) { return a.path < b.path; });
  for (const auto& f : listing.files) listing.total_bytes += f.size;
  const uint64_t limit = static_cast<uint64_t>(snapshot.max_size_mb) << 20;
  if (listing.total_bytes > limit) {
    *error_field = prefix + "max_size_mb";
    return InvalidArgument(fmt::format(
        "the snapshot of {} is {}, over its limit of {} (max_size_mb {}); the largest entries: "
        "{}; leave them out with .gitignore or include_paths, or raise max_size_mb",
        listing.root, HumanBytes(listing.total_bytes), HumanBytes(limit), snapshot.max_size_mb,
        LargestEntries(listing, 3)));
  }
  return listing;
}

}  // namespace air::spec
