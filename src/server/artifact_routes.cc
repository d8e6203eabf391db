// MLflow's artifact proxy API (/api/2.0/mlflow-artifacts/artifacts): upload (PUT), download
// (GET), list (GET ?path=) and delete, over AIR_HOME/tracking/artifacts. A run's artifact_uri
// is mlflow-artifacts:/<experiment_id>/<run_id>/artifacts, so the client sends paths below that
// root.
//
// Every path is checked component by component (no "..", ".", empty or absolute part, no
// backslash or NUL: "Invalid path", as MLflow says) and then reached through base/rooted_dir.h:
// no symbolic link below the artifacts directory is ever followed, whoever planted it.
// Uploads stream to a temporary file beside the target (resident memory does not grow with
// the file) and are renamed into place when complete; they are held to config.yaml's
// tracking_server.artifact_max_file_size and artifact_max_run_size (413 past either, counted
// with the other uploads to the same run in flight). Downloads stream from the open file.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "backends/cluster_registry.h"
#include "base/atomic_file.h"
#include "base/rooted_dir.h"
#include "base/strings.h"
#include "server/server_internal.h"

namespace air::server {
namespace {

using nlohmann::json;

constexpr char kPrefix[] = "/api/2.0/mlflow-artifacts/artifacts";
constexpr size_t kDownloadChunk = 256 * 1024;

// `relative` checked by MLflow's rules ("Invalid path" otherwise); trailing '/' dropped.
Result<std::string> CheckArtifactPath(const std::string& relative, bool allow_root) {
  if (relative.empty()) {
    if (allow_root) return relative;
    return InvalidArgument("Invalid path: empty");
  }
  if (relative[0] == '/' || relative.find('\0') != std::string::npos ||
      relative.find('\\') != std::string::npos) {
    return InvalidArgument(fmt::format("Invalid path '{}'", relative));
  }
  for (const std::string& part : Split(relative, '/')) {
    if (part == ".." || part == ".")
      return InvalidArgument(fmt::format("Invalid path '{}'", relative));
  }
  std::string trimmed = relative;
  while (!trimmed.empty() && trimmed.back() == '/') trimmed.pop_back();
  if (trimmed.find("//") != std::string::npos) {
    return InvalidArgument(fmt::format("Invalid path '{}'", relative));
  }
  return trimmed;
}

std::string PathAfterPrefix(const httplib::Request& req) {
  return req.matches.size() > 1 ? std::string(req.matches[1]) : std::string();
}

Result<RootedDir> ArtifactRoot(ServerContext& ctx) {
  return RootedDir::Open(ctx.files.ArtifactsDir(), "");
}

// Bytes of regular files below `dir` (links and their targets are not counted or followed;
// uploads in flight count through their reservations, not their temporary files).
uint64_t TreeBytes(int dir_fd) {
  auto entries = ListDirAt(dir_fd, "");
  if (!entries.ok()) return 0;
  uint64_t total = 0;
  for (const DirEntry& e : *entries) {
    if (IsAtomicTempName(e.name)) continue;
    if (e.type == DirEntry::Type::kFile) total += e.size;
    if (e.type != DirEntry::Type::kDirectory) continue;
    int child = ::openat(dir_fd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) continue;
    Fd owned(child);
    total += TreeBytes(child);
  }
  return total;
}

// An upload's share of its run's quota, released when the upload ends.
class Reservation {
 public:
  Reservation(ArtifactReservations* reservations, std::string run)
      : reservations_(reservations), run_(std::move(run)) {}
  ~Reservation() {
    std::lock_guard<std::mutex> lock(reservations_->mutex());
    reservations_->Add(run_, -static_cast<int64_t>(held_));
  }
  // Takes `bytes` more when the run stays within `limit` counting `stored` and every upload
  // in flight.
  bool Grow(uint64_t bytes, uint64_t stored, uint64_t limit) {
    std::lock_guard<std::mutex> lock(reservations_->mutex());
    if (stored + reservations_->InFlight(run_) + bytes > limit) return false;
    reservations_->Add(run_, static_cast<int64_t>(bytes));
    held_ += bytes;
    return true;
  }

 private:
  ArtifactReservations* reservations_;
  std::string run_;
  uint64_t held_ = 0;
};

void SendTooLarge(httplib::Response& res, const std::string& message) {
  CloseAfter(res);
  SendError(res, 413, "RESOURCE_EXHAUSTED", message);
}

void Upload(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
            const httplib::ContentReader& reader) {
  auto path = CheckArtifactPath(PathAfterPrefix(req), false);
  if (!path.ok()) {
    CloseAfter(res);
    return SendError(res, path.status());
  }
  std::vector<std::string> parts = Split(*path, '/');
  if (parts.size() < 3) {
    CloseAfter(res);
    return SendError(res,
                     InvalidArgument(fmt::format("Invalid path '{}': artifacts are stored below "
                                                 "<experiment_id>/<run_id>/ (a run's artifact_uri)",
                                                 *path)));
  }
  if (req.is_multipart_form_data()) {
    CloseAfter(res);
    return SendError(res, InvalidArgument("multipart artifact uploads are not supported; PUT "
                                          "the file's bytes as the body"));
  }
  auto config = backends::LoadClusterConfig(ctx.air_home, "", ctx.env);
  if (!config.ok()) {
    CloseAfter(res);
    return SendError(res, config.status());
  }
  const uint64_t max_file = config->tracking_server.artifact_max_file_bytes;
  const uint64_t max_run = config->tracking_server.artifact_max_run_bytes;
  const std::string where =
      config->config_path.empty() ? "AIR_HOME/config.yaml" : config->config_path;
  const std::string run = parts[0] + "/" + parts[1];
  auto file_too_large = [&](uint64_t bytes) {
    SendTooLarge(res, fmt::format("artifact '{}' ({}{}) is over the per-file limit of {} "
                                  "(tracking_server.artifact_max_file_size in {})",
                                  *path, bytes == max_file + 1 ? "more than " : "",
                                  HumanBytes(bytes == max_file + 1 ? max_file : bytes),
                                  HumanBytes(max_file), where));
  };
  uint64_t declared = 0;
  if (req.has_header("Content-Length")) {
    std::string length = req.get_header_value("Content-Length");
    declared = std::strtoull(length.c_str(), nullptr, 10);
    if (declared > max_file) return file_too_large(declared);
  }

  auto root = ArtifactRoot(ctx);
  if (!root.ok()) return SendError(res, root.status());
  std::string leaf;
  auto dir = root->OpenParent(*path, /*create=*/true, &leaf, 0700);
  if (!dir.ok()) {
    CloseAfter(res);
    return SendError(res, dir.status());
  }
  // What the run holds now, less the file this upload replaces.
  uint64_t stored = 0;
  if (auto run_dir = root->OpenDir(run, false); run_dir.ok()) stored = TreeBytes(run_dir->get());
  struct stat old {};
  if (::fstatat(dir->get(), leaf.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode)) {
    stored -= std::min<uint64_t>(stored, static_cast<uint64_t>(old.st_size));
  }
  Reservation reservation(&ctx.reservations, run);
  auto run_too_large = [&] {
    SendTooLarge(res, fmt::format("run {} holds {} of artifacts; '{}' would take it over the "
                                  "per-run limit of {} (tracking_server.artifact_max_run_size "
                                  "in {})",
                                  run, HumanBytes(stored), *path, HumanBytes(max_run), where));
  };
  if (!reservation.Grow(declared, stored, max_run)) return run_too_large();

  auto pending = PendingFile::Create(ctx.env, dir->get(), leaf, 0600, *path);
  if (!pending.ok()) {
    CloseAfter(res);
    return SendError(res, pending.status());
  }
  uint64_t reserved = declared;
  bool over_file = false, over_run = false;
  Status write_status;
  const bool read = reader([&](const char* data, size_t size) {
    const uint64_t after = pending->written() + size;
    if (after > max_file) {
      over_file = true;
      return false;
    }
    if (after > reserved) {  // chunked, or more than Content-Length said
      if (!reservation.Grow(after - reserved, stored, max_run)) {
        over_run = true;
        return false;
      }
      reserved = after;
    }
    write_status = pending->Write(std::string_view(data, size));
    return write_status.ok();
  });
  if (over_file) return file_too_large(max_file + 1);
  if (over_run) return run_too_large();
  if (!write_status.ok()) {
    CloseAfter(res);
    return SendError(res, write_status);
  }
  if (!read) {
    CloseAfter(res);
    return SendError(res, 400, "BAD_REQUEST", "the upload's body could not be read in full");
  }
  if (Status committed = pending->Commit(/*replace=*/true); !committed.ok()) {
    return SendError(res, committed);
  }
  SendJson(res, json::object());
}

void Download(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto path = CheckArtifactPath(PathAfterPrefix(req), false);
  if (!path.ok()) return SendError(res, path.status());
  auto root = ArtifactRoot(ctx);
  if (!root.ok()) return SendError(res, root.status());
  auto file = root->OpenFileForRead(*path);
  if (!file.ok()) {
    if (file.status().code() == ErrorCode::kNotFound) {
      return SendError(res, NotFound(fmt::format("No artifact at '{}'", *path)));
    }
    return SendError(res, file.status());
  }
  struct stat st {};
  if (::fstat(file->get(), &st) != 0) return SendError(res, ErrnoStatus("stat " + *path, errno));
  auto fd = std::make_shared<Fd>(std::move(*file));
  res.set_content_provider(static_cast<size_t>(st.st_size), "application/octet-stream",
                           [fd](size_t offset, size_t length, httplib::DataSink& sink) {
                             std::string buffer(std::min(length, kDownloadChunk), '\0');
                             ssize_t n = ::pread(fd->get(), buffer.data(), buffer.size(),
                                                 static_cast<off_t>(offset));
                             if (n <= 0)
                               return false;  // the file shrank under us: end the response early
                             return sink.write(buffer.data(), static_cast<size_t>(n));
                           });
}

void Remove(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto path = CheckArtifactPath(PathAfterPrefix(req), false);
  if (!path.ok()) return SendError(res, path.status());
  auto root = ArtifactRoot(ctx);
  if (!root.ok()) return SendError(res, root.status());
  std::string leaf;
  auto dir = root->OpenParent(*path, false, &leaf);
  if (dir.ok()) {
    auto removed = RemoveAt(dir->get(), leaf, /*recursive=*/true, *path);
    if (!removed.ok() && removed.status().code() != ErrorCode::kNotFound) {
      return SendError(res, removed.status());
    }
  } else if (dir.status().code() != ErrorCode::kNotFound) {
    return SendError(res, dir.status());
  }
  SendJson(res, json::object());
}

void List(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto path = CheckArtifactPath(req.has_param("path") ? req.get_param_value("path") : "", true);
  if (!path.ok()) return SendError(res, path.status());
  auto root = ArtifactRoot(ctx);
  if (!root.ok()) return SendError(res, root.status());
  json files = json::array();
  auto dir = root->OpenDir(*path, false);
  if (!dir.ok()) {
    // Nothing there, or a file: no entries. A link on the way is refused.
    const bool none = dir.status().code() == ErrorCode::kNotFound ||
                      dir.status().message().find("is not a directory") != std::string::npos;
    if (!none) return SendError(res, dir.status());
  }
  if (dir.ok()) {
    auto entries = ListDirAt(dir->get(), *path);
    if (!entries.ok()) return SendError(res, entries.status());
    for (const DirEntry& e : *entries) {
      if (IsAtomicTempName(e.name)) continue;  // an upload in flight
      if (e.type == DirEntry::Type::kDirectory) {
        files.push_back({{"path", e.name}, {"is_dir", true}});
      } else if (e.type == DirEntry::Type::kFile) {
        files.push_back({{"path", e.name}, {"is_dir", false}, {"file_size", e.size}});
      }
    }
  }
  json body = json::object();
  if (!files.empty()) body["files"] = files;
  SendJson(res, body);
}

}  // namespace

uint64_t ArtifactReservations::InFlight(const std::string& run) const {
  auto it = bytes_.find(run);
  return it == bytes_.end() ? 0 : it->second;
}

void ArtifactReservations::Add(const std::string& run, int64_t bytes) {
  uint64_t& held = bytes_[run];
  held = bytes < 0 ? held - std::min<uint64_t>(held, static_cast<uint64_t>(-bytes))
                   : held + static_cast<uint64_t>(bytes);
  if (held == 0) bytes_.erase(run);
}

void RegisterArtifactRoutes(httplib::Server& http, ServerContext& ctx) {
  std::string pattern = std::string(kPrefix) + "/(.+)";
  http.Put(pattern,
           [&ctx](const httplib::Request& req, httplib::Response& res,
                  const httplib::ContentReader& reader) { Upload(ctx, req, res, reader); });
  http.Get(pattern, [&ctx](const httplib::Request& req, httplib::Response& res) {
    Download(ctx, req, res);
  });
  http.Delete(pattern, [&ctx](const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader&) { Remove(ctx, req, res); });
  http.Get(kPrefix,
           [&ctx](const httplib::Request& req, httplib::Response& res) { List(ctx, req, res); });
}

}  // namespace air::server
