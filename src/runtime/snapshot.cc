// Content-addressed code snapshots: archive, manifest, materialize.
#include "runtime/snapshot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/hashing.h"
#include "runtime/subprocess.h"

namespace air::runtime {
namespace {

bool IsExecutable(uint32_t mode) { return (mode & 0111) != 0; }

std::string BlobPath(const Layout& layout, const SnapshotEntry& entry) {
  return layout.CasPath(entry.digest) + (IsExecutable(entry.mode) ? ".x" : "");
}

Status WriteAllTo(int fd, std::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + path, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Stores `content` as a read-only blob unless an intact one is already there. Blobs are named by
// their content, so a torn earlier write shows as a size mismatch and is simply rewritten.
Result<bool> StoreBlob(const std::string& path, std::string_view content, bool executable,
                       Env* env) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == content.size()) {
    return false;
  }
  std::string dir = path.substr(0, path.rfind('/'));
  AIR_RETURN_IF_ERROR(env->CreateDirs(dir));
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("create " + tmp, errno);
  Status written = WriteAllTo(fd, content, tmp);
  if (written.ok() && ::fchmod(fd, executable ? 0555 : 0444) != 0) {
    written = ErrnoStatus("chmod " + tmp, errno);
  }
  ::close(fd);
  if (written.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    written = ErrnoStatus("rename " + tmp, errno);
  }
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  return true;
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
  std::string tmp_dir = layout.home() + "/tmp";
  AIR_RETURN_IF_ERROR(env->CreateDirs(tmp_dir));
  std::string input_path = fmt::format("{}/cat-file-{}.txt", tmp_dir, ::getpid());
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(input_path, input));
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

nlohmann::json ManifestJson(const Snapshot& snapshot) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& e : snapshot.entries) {
    if (e.is_symlink) {
      files.push_back({{"path", e.path}, {"symlink", e.link_target}});
    } else {
      files.push_back({{"path", e.path}, {"digest", e.digest}, {"mode", e.mode}, {"size", e.size}});
    }
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
    if (!listing.revision.empty()) {
      content = std::move(git_contents[file.path]);
    } else if (file.is_symlink) {
      std::string path = listing.root + "/" + file.path;
      char target[4096];
      ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
      if (n < 0) return ErrnoStatus("readlink " + path, errno);
      content.assign(target, static_cast<size_t>(n));
    } else {
      AIR_ASSIGN_OR_RETURN(content, env->ReadFile(listing.root + "/" + file.path));
    }
    entry.size = content.size();
    if (entry.is_symlink) {
      entry.link_target = std::move(content);
    } else {
      entry.digest = Sha256Hex(content);
      AIR_ASSIGN_OR_RETURN(
          bool stored, StoreBlob(BlobPath(layout, entry), content, IsExecutable(entry.mode), env));
      snapshot.new_blobs += stored ? 1 : 0;
      snapshot.total_bytes += entry.size;
    }
    snapshot.entries.push_back(std::move(entry));
  }
  std::string manifest = ManifestJson(snapshot).dump();
  snapshot.id = Sha256Hex(manifest);
  AIR_RETURN_IF_ERROR(env->CreateDirs(layout.SnapshotsDir()));
  std::string manifest_path = layout.SnapshotManifest(snapshot.id);
  if (!env->FileExists(manifest_path)) {
    AIR_RETURN_IF_ERROR(env->WriteFileAtomic(manifest_path, manifest));
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
      e.path = f.at("path").get<std::string>();
      if (f.contains("symlink")) {
        e.is_symlink = true;
        e.link_target = f.at("symlink").get<std::string>();
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
      if (::symlink(entry.link_target.c_str(), target.c_str()) != 0) {
        return ErrnoStatus("symlink " + target, errno);
      }
      continue;
    }
    std::string blob = BlobPath(layout, entry);
    struct stat st;
    if (::stat(blob.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != entry.size) {
      return DataLoss(
          fmt::format("snapshot {}: the stored content of {} ({}) is missing or "
                      "damaged; submit the run again to re-archive it",
                      snapshot.id.substr(0, 12), entry.path, blob));
    }
    if (::link(blob.c_str(), target.c_str()) == 0) continue;
    if (errno != EXDEV && errno != EMLINK && errno != EPERM) {
      return ErrnoStatus("link " + blob + " to " + target, errno);
    }
    AIR_ASSIGN_OR_RETURN(std::string content, env->ReadFile(blob));
    AIR_RETURN_IF_ERROR(
        env->WriteFileAtomic(target, content, IsExecutable(entry.mode) ? 0555 : 0444));
  }
  return Status::Ok();
}

}  // namespace air::runtime
