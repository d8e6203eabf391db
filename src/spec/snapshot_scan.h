// ScanSnapshot: the exact list of files a run's code snapshot will contain, so the dry run can
// show its size and the runtime can archive exactly that list.
//
// Working tree (no `git:`): every regular file and symlink under root_path (symlinks are listed,
// never followed), skipping any `.git` entry, `__pycache__` directories, Python virtualenvs (any
// directory holding a pyvenv.cfg: `.venv/`, `env/`, ...; a venv's symlinks point outside the
// tree and it never runs on another machine) and whatever the .gitignore files exclude (root and
// nested ones; see gitignore.h); with include_paths, only those files or directories.
// A listing larger than snapshot.max_size_mb is an InvalidArgument (field max_size_mb) naming
// its largest entries, so the user sees what to leave out. With
// `git: {branch | commit}`: the files of that revision as `git -C ROOT ls-tree -r -l -z REV`
// lists them (run without a shell; paths below ROOT when ROOT is a subdirectory of the
// repository), filtered by include_paths; submodules are skipped. An unknown revision, a missing
// include path or a root outside a repository is an InvalidArgument naming it.
// Thread safety: reentrant; reads the file system only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "spec/workload_spec.h"

namespace air::spec {

struct SnapshotFile {
  std::string path;      // relative to root_path, '/'-separated
  uint64_t size = 0;     // bytes (a symlink: the length of its target)
  uint32_t mode = 0644;  // permission bits: 0644, 0755, ... (0777 for symlinks)
  bool is_symlink = false;
};

struct SnapshotListing {
  std::string root;                 // absolute root_path
  std::string revision;             // the resolved commit (git mode), else ""
  std::vector<SnapshotFile> files;  // sorted by path
  uint64_t total_bytes = 0;
  size_t ignored_entries = 0;  // entries skipped by .gitignore rules (working tree mode)
  // Directories skipped as Python virtualenvs or __pycache__ (working tree mode), relative.
  std::vector<std::string> skipped_dirs;
};

// True for a '/'-separated path below the root: not empty, not absolute, no empty, "." or ".."
// component (a git tree can hold "../x"; such a path would leave the node's directory).
bool IsContainedRelativePath(std::string_view path);

// The target a snapshot stores for the symlink at `link_path` (relative to the root) pointing at
// `target`: a relative target that stays inside the root, as is; an absolute one below
// `root` (the root's absolute path), rewritten relative to the link. A target that leaves the
// root (an absolute path elsewhere, or too many ".."), which would make the node's code depend
// on whatever the node's machine has there, is an InvalidArgument naming the link and target.
Result<std::string> ContainedLinkTarget(const std::string& link_path, const std::string& target,
                                        const std::string& root);

// On an InvalidArgument, *error_field (when given) names the spec field at fault, e.g.
// "code_source.snapshot.git.branch" or "code_source.snapshot.include_paths[1]".
// `air_home` (when not empty) is air's own state directory: in working-tree mode it is never
// part of a snapshot, even when it lies below root_path (its database and secrets must not
// travel to the nodes).
Result<SnapshotListing> ScanSnapshot(const SnapshotSpec& snapshot, Env* env,
                                     std::string* error_field = nullptr,
                                     const std::string& air_home = "");

}  // namespace air::spec
