// MLflow's artifact proxy API (/api/2.0/mlflow-artifacts/artifacts): upload (PUT), download
// (GET), list (GET ?path=) and delete, over AIR_HOME/tracking/artifacts. A run's artifact_uri
// is mlflow-artifacts:/<experiment_id>/<run_id>/artifacts, so the client sends paths below that
// root. Every path is checked component by component: no "..", ".", empty or absolute part, no
// NUL; nothing outside the artifacts directory is ever read or written.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "base/strings.h"
#include "server/server_internal.h"

namespace air::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kPrefix[] = "/api/2.0/mlflow-artifacts/artifacts";

// `relative` checked and joined to the artifacts root; InvalidArgument ("Invalid path", as MLflow
// says) when it would leave it.
Result<std::string> ResolveArtifactPath(const ServerContext& ctx, const std::string& relative,
                                        bool allow_root) {
  if (relative.empty()) {
    if (allow_root) return ctx.files.ArtifactsDir();
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
  return ctx.files.ArtifactsDir() + "/" + trimmed;
}

std::string PathAfterPrefix(const httplib::Request& req) {
  return req.matches.size() > 1 ? std::string(req.matches[1]) : std::string();
}

void Upload(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto path = ResolveArtifactPath(ctx, PathAfterPrefix(req), false);
  if (!path.ok()) return SendError(res, path.status());
  std::string dir = path->substr(0, path->rfind('/'));
  Status made = ctx.env->CreateDirs(dir, 0700);
  if (made.ok()) made = ctx.env->WriteFileAtomic(*path, req.body, 0600);
  if (!made.ok()) return SendError(res, made);
  SendJson(res, json::object());
}

void Download(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto path = ResolveArtifactPath(ctx, PathAfterPrefix(req), false);
  if (!path.ok()) return SendError(res, path.status());
  if (ctx.env->IsDirectory(*path)) {
    return SendError(res,
                     InvalidArgument(fmt::format("'{}' is a directory", PathAfterPrefix(req))));
  }
  auto data = ctx.env->ReadFile(*path);
  if (!data.ok()) {
    if (data.status().code() == ErrorCode::kNotFound || !ctx.env->FileExists(*path)) {
      return SendError(res, NotFound(fmt::format("No artifact at '{}'", PathAfterPrefix(req))));
    }
    return SendError(res, data.status());
  }
  res.set_content(std::move(*data), "application/octet-stream");
}

void Remove(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto path = ResolveArtifactPath(ctx, PathAfterPrefix(req), false);
  if (!path.ok()) return SendError(res, path.status());
  Status removed = ctx.env->RemoveAll(*path);
  if (!removed.ok()) return SendError(res, removed);
  SendJson(res, json::object());
}

void List(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string relative = req.has_param("path") ? req.get_param_value("path") : "";
  auto path = ResolveArtifactPath(ctx, relative, true);
  if (!path.ok()) return SendError(res, path.status());
  json files = json::array();
  if (ctx.env->IsDirectory(*path)) {
    auto names = ctx.env->ListDir(*path);
    if (!names.ok()) return SendError(res, names.status());
    for (const std::string& name : *names) {
      std::string full = *path + "/" + name;
      struct stat st {};
      if (::lstat(full.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
      if (S_ISDIR(st.st_mode)) {
        files.push_back({{"path", name}, {"is_dir", true}});
      } else if (S_ISREG(st.st_mode)) {
        files.push_back({{"path", name}, {"is_dir", false}, {"file_size", st.st_size}});
      }
    }
  }
  json body = json::object();
  if (!files.empty()) body["files"] = files;
  SendJson(res, body);
}

}  // namespace

void RegisterArtifactRoutes(httplib::Server& http, ServerContext& ctx) {
  std::string pattern = std::string(kPrefix) + "/(.+)";
  http.Put(pattern,
           [&ctx](const httplib::Request& req, httplib::Response& res) { Upload(ctx, req, res); });
  http.Get(pattern, [&ctx](const httplib::Request& req, httplib::Response& res) {
    Download(ctx, req, res);
  });
  http.Delete(pattern, [&ctx](const httplib::Request& req, httplib::Response& res) {
    Remove(ctx, req, res);
  });
  http.Get(kPrefix,
           [&ctx](const httplib::Request& req, httplib::Response& res) { List(ctx, req, res); });
}

}  // namespace air::server
