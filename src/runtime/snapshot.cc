// Content-addressed code snapshots: archive, manifest, materialize.
#include "runtime/snapshot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/atomic_file.h"
#include "base/private_dir.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "runtime/hashing.h"

namespace air::runtime {
namespace {

bool IsExecutable(uint32_t mode) { return (mode & 0111) != 0; }

std::string BlobPath(const Layout& layout, const SnapshotEntry& entry) {
  return layout.CasPath(entry.digest) + (IsExecutable(entry.mode) ? ".x" : "");
}

struct StoredFile {
  std::string digest;
  uint64_t size = 0;
  bool new_blob = false;
};

// The SHA-256 and size of a file, read in pieces (a snapshot may hold files larger than memory).
Result<StoredFile> HashFile(const std::string& path, Env* env) {
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
  Sha256 hash;
  StoredFile out;
  char buf[1 << 16];
  while (true) {
    AIR_ASSIGN_OR_RETURN(size_t n, file->Read(buf, sizeof(buf)));
    if (n == 0) break;
    hash.Update(std::string_view(buf, n));
    out.size += n;
  }
  out.digest = hash.FinishHex();
  return out;
}

// True when the blob at `path` exists with exactly this digest and size: a blob is trusted by
// its hash, never by its size alone (a damaged blob of the right length is rewritten).
bool IntactBlob(const std::string& path, const std::string& digest, uint64_t size, Env* env) {
  auto stored_size = env->FileSize(path);
  if (!stored_size.ok() || *stored_size != size) return false;
  auto stored = HashFile(path, env);
  return stored.ok() && stored->digest == digest;
}

// Stores `content` as a read-only blob unless an intact one is already there. Blobs are named by
// their content, so a torn or damaged earlier write fails the hash check and is rewritten.
Result<bool> StoreBlob(const std::string& path, const std::string& digest, std::string_view content,
                       bool executable, Env* env) {
  if (IntactBlob(path, digest, content.size(), env)) return false;
  AIR_RETURN_IF_ERROR(MakePrivateDir(path.substr(0, path.rfind('/')), env));
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(path, content, executable ? 0500 : 0400));
  return true;
}

// Creates `to` (which must not exist) as a copy of `from` with permission bits `mode`.
Status CopyFileAs(const std::string& from, const std::string& to, mode_t mode, Env* env) {
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out,
                       env->NewWritableFile(to, WriteMode::kCreateNew, mode));
  AIR_RETURN_IF_ERROR(out->AppendFileContents(from));
  return out->Close();
}

// Stores a working-tree file as a read-only blob without holding it in memory: hashes it and,
// when no intact blob has that content yet, copies it in and checks the copy's digest (the file
// may be edited while `air run` archives it).
Result<StoredFile> StoreFileBlob(const Layout& layout, const std::string& path, bool executable,
                                 Env* env) {
  AIR_ASSIGN_OR_RETURN(StoredFile file, HashFile(path, env));
  SnapshotEntry probe;
  probe.digest = file.digest;
  probe.mode = executable ? 0755 : 0644;
  const std::string blob = BlobPath(layout, probe);
  if (IntactBlob(blob, file.digest, file.size, env)) return file;
  AIR_RETURN_IF_ERROR(MakePrivateDir(blob.substr(0, blob.rfind('/')), env));
  AtomicFileWriter writer(env, blob, executable ? 0500 : 0400);
  AIR_RETURN_IF_ERROR(writer.Open());
  AIR_RETURN_IF_ERROR(writer.AppendFileContents(path));
  AIR_ASSIGN_OR_RETURN(StoredFile copied, HashFile(writer.temp_path(), env));
  if (copied.digest != file.digest) {
    return Unavailable(fmt::format("{} changed while it was archived; submit the run again", path));
  }
  AIR_RETURN_IF_ERROR(writer.Commit());
  file.new_blob = true;
  return file;
}

// Reads the contents of `paths` at `revision` with one `git cat-file --batch`.
Result<std::map<std::string, std::string>> ReadGitBlobs(const Layout& layout,
                                                        const spec::SnapshotListing& listing,
                                                        Env* env) {
  std::string input;
  for (const auto& file : listing.files) {
    if (file.path.find('\n') != std::string::npos) {
      return InvalidArgument(
          fmt::format("code_source.snapshot: the file name '{}' in revision "
                      "{} contains a newline, which snapshots do not support",
                      file.path, listing.revision));
    }
    input += listing.revision + ":./" + file.path + "\n";
  }
  std::string tmp_dir = layout.data_root() + "/tmp";  // renamed into the CAS: same filesystem
  AIR_RETURN_IF_ERROR(MakePrivateDir(tmp_dir, env));
  std::string input_path = fmt::format("{}/cat-file-{}.txt", tmp_dir, ::getpid());
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(input_path, input, 0600));
  SubprocessOptions git;
  git.argv = {"git", "-C", listing.root, "cat-file", "--batch"};
  git.stdin_path = input_path;
  auto ran = RunSubprocess(git);
  (void)env->RemoveAll(input_path);
  if (!ran.ok()) return ran.status();
  if (!ran->succeeded()) {
    return FailedPrecondition(fmt::format("git cat-file in {} failed ({}): {}", listing.root,
                                          ran->Describe(), ran->output));
  }
  std::map<std::string, std::string> contents;
  const std::string& out = ran->output;
  size_t pos = 0;
  for (const auto& file : listing.files) {
    size_t eol = out.find('\n', pos);
    if (eol == std::string::npos) return Internal("git cat-file: truncated output");
    std::string header = out.substr(pos, eol - pos);
    // "<oid> blob <size>" or "<name> missing"
    size_t last_space = header.rfind(' ');
    if (header.find(" blob ") == std::string::npos || last_space == std::string::npos) {
      return FailedPrecondition(
          fmt::format("revision {} has no file {} ({})", listing.revision, file.path, header));
    }
    size_t size = std::stoull(header.substr(last_space + 1));
    if (eol + 1 + size > out.size()) return Internal("git cat-file: truncated object");
    contents[file.path] = out.substr(eol + 1, size);
    pos = eol + 1 + size + 1;  // content, then a newline
  }
  return contents;
}

// A file name or link target in the manifest: as a string when it is UTF-8 (JSON text must be),
// else its bytes as hex under "<key>_hex", so any Linux file name round-trips.
void PutName(nlohmann::json* j, const std::string& key, const std::string& value) {
  if (IsValidUtf8(value)) {
    (*j)[key] = value;
  } else {
    (*j)[key + "_hex"] = HexEncode(value);
  }
}

std::optional<std::string> GetName(const nlohmann::json& j, const std::string& key) {
  if (auto it = j.find(key); it != j.end()) return it->get<std::string>();
  if (auto it = j.find(key + "_hex"); it != j.end()) return HexDecode(it->get<std::string>());
  return std::nullopt;
}

nlohmann::json ManifestJson(const Snapshot& snapshot) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& e : snapshot.entries) {
    nlohmann::json f = nlohmann::json::object();
    PutName(&f, "path", e.path);
    if (e.is_symlink) {
      PutName(&f, "symlink", e.link_target);
    } else {
      f["digest"] = e.digest;
      f["mode"] = e.mode;
      f["size"] = e.size;
    }
    files.push_back(std::move(f));
  }
  return {{"format", 1}, {"revision", snapshot.revision}, {"files", files}};
}

}  // namespace

Result<Snapshot> ArchiveSnapshot(const Layout& layout, const spec::SnapshotListing& listing,
                                 Env* env) {
  Snapshot snapshot;
  snapshot.revision = listing.revision;
  std::map<std::string, std::string> git_contents;
  if (!listing.revision.empty()) {
    AIR_ASSIGN_OR_RETURN(git_contents, ReadGitBlobs(layout, listing, env));
  }
  for (const auto& file : listing.files) {
    SnapshotEntry entry;
    entry.path = file.path;
    entry.mode = file.mode;
    entry.is_symlink = file.is_symlink;
    std::string content;
    if (listing.revision.empty() && !file.is_symlink) {
      AIR_ASSIGN_OR_RETURN(StoredFile stored, StoreFileBlob(layout, listing.root + "/" + file.path,
                                                            IsExecutable(entry.mode), env));
      entry.digest = stored.digest;
      entry.size = stored.size;
      snapshot.new_blobs += stored.new_blob ? 1 : 0;
      snapshot.total_bytes += entry.size;
      snapshot.entries.push_back(std::move(entry));
      continue;
    }
    if (!listing.revision.empty()) {
      content = std::move(git_contents[file.path]);
    } else {
      std::string path = listing.root + "/" + file.path;
      char target[4096];
      ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
      if (n < 0) return ErrnoStatus("readlink " + path, errno);
      content.assign(target, static_cast<size_t>(n));
    }
    entry.size = content.size();
    if (entry.is_symlink) {
      AIR_ASSIGN_OR_RETURN(entry.link_target,
                           spec::ContainedLinkTarget(file.path, content, listing.root));
    } else {
      entry.digest = Sha256Hex(content);
      AIR_ASSIGN_OR_RETURN(bool stored, StoreBlob(BlobPath(layout, entry), entry.digest, content,
                                                  IsExecutable(entry.mode), env));
      snapshot.new_blobs += stored ? 1 : 0;
      snapshot.total_bytes += entry.size;
    }
    snapshot.entries.push_back(std::move(entry));
  }
  std::string manifest = ManifestJson(snapshot).dump();
  snapshot.id = Sha256Hex(manifest);
  AIR_RETURN_IF_ERROR(MakePrivateDir(layout.SnapshotsDir(), env));
  std::string manifest_path = layout.SnapshotManifest(snapshot.id);
  if (!env->FileExists(manifest_path)) {
    AIR_RETURN_IF_ERROR(env->WriteFileAtomic(manifest_path, manifest, 0600));
  }
  return snapshot;
}

Result<Snapshot> LoadSnapshot(const Layout& layout, const std::string& id, Env* env) {
  std::string path = layout.SnapshotManifest(id);
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
  if (Sha256Hex(text) != id) return DataLoss(path + ": the manifest does not match its digest");
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    Snapshot snapshot;
    snapshot.id = id;
    snapshot.revision = j.at("revision").get<std::string>();
    for (const auto& f : j.at("files")) {
      SnapshotEntry e;
      std::optional<std::string> name = GetName(f, "path");
      if (!name || !spec::IsContainedRelativePath(*name)) {
        return DataLoss(fmt::format("{}: an entry's path is missing or leaves the snapshot", path));
      }
      e.path = std::move(*name);
      if (std::optional<std::string> target = GetName(f, "symlink")) {
        e.is_symlink = true;
        e.link_target = std::move(*target);
        e.mode = 0777;
      } else {
        e.digest = f.at("digest").get<std::string>();
        e.mode = f.at("mode").get<uint32_t>();
        e.size = f.at("size").get<uint64_t>();
        snapshot.total_bytes += e.size;
      }
      snapshot.entries.push_back(std::move(e));
    }
    return snapshot;
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(path + ": not a snapshot manifest: " + e.what());
  }
}

Status MaterializeSnapshot(const Layout& layout, const Snapshot& snapshot, const std::string& dest,
                           Env* env) {
  AIR_RETURN_IF_ERROR(env->RemoveAll(dest));
  AIR_RETURN_IF_ERROR(env->CreateDirs(dest));
  for (const auto& entry : snapshot.entries) {
    std::string target = dest + "/" + entry.path;
    size_t slash = target.rfind('/');
    AIR_RETURN_IF_ERROR(env->CreateDirs(target.substr(0, slash)));
    if (entry.is_symlink) {
      // Only links that stay inside the node's directory (ArchiveSnapshot stored no other).
      auto contained = spec::ContainedLinkTarget(entry.path, entry.link_target, dest);
      if (!contained.ok() || *contained != entry.link_target) {
        return DataLoss(fmt::format("snapshot {}: the link {} -> {} leaves the snapshot",
                                    snapshot.id.substr(0, 12), entry.path, entry.link_target));
      }
      if (::symlink(entry.link_target.c_str(), target.c_str()) != 0) {
        return ErrnoStatus("symlink " + target, errno);
      }
      continue;
    }
    std::string blob = BlobPath(layout, entry);
    auto damaged = [&] {
      return DataLoss(
          fmt::format("snapshot {}: the stored content of {} ({}) is missing or "
                      "damaged; submit the run again to re-archive it",
                      snapshot.id.substr(0, 12), entry.path, blob));
    };
    if (auto size = env->FileSize(blob); !size.ok() || *size != entry.size) return damaged();
    // A copy, never a hard link: a job may write to its files anyway (root ignores the mode
    // bits; anyone may chmod their own file), and through a link that write would change the
    // shared blob, and so the code of every other node and of every later run.
    AIR_RETURN_IF_ERROR(CopyFileAs(blob, target, IsExecutable(entry.mode) ? 0500 : 0400, env));
    // The copy is checked by its hash: a blob damaged in place keeps its size.
    auto copied = HashFile(target, env);
    if (!copied.ok() || copied->digest != entry.digest) return damaged();
  }
  return Status::Ok();
}

}  // namespace air::runtime
