// Code snapshots (docs/run-directory.md): the files spec::ScanSnapshot lists are stored once in
// a content-addressed store (AIR_HOME/cas/sha256/, one read-only file per distinct content and
// executable bit) and described by a manifest whose own SHA-256 is the snapshot id. Runs with
// the same code share blobs and manifest; a later edit to the working tree does not change a
// submitted run. With `git: {branch|commit}` the contents come from that revision's objects
// (`git cat-file --batch`), not from the working tree.
//
// Working-tree files are hashed and copied in pieces (a file may not fit in memory). Each node
// gets its own copy of every file (a copy-on-write clone where the file system can, never a hard
// link: a write through it would change the shared blob): files are read-only, directories stay
// writable so a job can write caches and outputs beside its code.
// Thread safety: stateless; concurrent archiving of the same content is safe (blobs are written
// to a temporary name and renamed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "spec/snapshot_scan.h"

namespace air::runtime {

struct SnapshotEntry {
  std::string path;      // relative, '/'-separated
  std::string digest;    // SHA-256 of the content (empty for symlinks)
  uint32_t mode = 0644;  // permission bits as scanned
  uint64_t size = 0;
  std::string link_target;  // for symlinks
  bool is_symlink = false;
};

struct Snapshot {
  std::string id;        // SHA-256 of the manifest
  std::string revision;  // git commit, or "" for a working tree
  std::vector<SnapshotEntry> entries;
  uint64_t total_bytes = 0;
  size_t new_blobs = 0;  // blobs this archive call had to store (0: fully deduplicated)
};

// Stores the listed files (read from listing.root, or from `revision` of its repository).
Result<Snapshot> ArchiveSnapshot(const Layout& layout, const spec::SnapshotListing& listing,
                                 Env* env);

Result<Snapshot> LoadSnapshot(const Layout& layout, const std::string& id, Env* env);

// Creates `dest` (replacing anything there) holding every file of the snapshot.
Status MaterializeSnapshot(const Layout& layout, const Snapshot& snapshot, const std::string& dest,
                           Env* env);

}  // namespace air::runtime
