// The web UI's files: / and /runs/<id> serve web/index.html (one page; app.js reads the path),
// /static/<name> the files of web/ by a fixed list of names, /static/chart.js the Debian
// libjs-chart.js build. No path from a request reaches the file system.
#include <fmt/format.h>

#include "server/server_internal.h"

namespace air::server {
namespace {

void ServeFile(ServerContext& ctx, const std::string& path, const char* type,
               httplib::Response& res) {
  auto data = ctx.env->ReadFile(path);
  if (!data.ok()) {
    return SendError(
        res, 500, "INTERNAL_ERROR",
        fmt::format("the web UI file {} is missing: {}", path, data.status().message()));
  }
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(std::move(*data), type);
}

}  // namespace

void RegisterWebRoutes(httplib::Server& http, ServerContext& ctx) {
  auto index = [&ctx](const httplib::Request&, httplib::Response& res) {
    ServeFile(ctx, ctx.web_dir + "/index.html", "text/html; charset=utf-8", res);
  };
  http.Get("/", index);
  http.Get(R"(/runs/(\d+))", index);
  for (auto [name, type] : {std::pair{"app.js", "text/javascript; charset=utf-8"},
                            std::pair{"style.css", "text/css; charset=utf-8"}}) {
    std::string file = name;
    const char* content_type = type;
    http.Get("/static/" + file,
             [&ctx, file, content_type](const httplib::Request&, httplib::Response& res) {
               ServeFile(ctx, ctx.web_dir + "/" + file, content_type, res);
             });
  }
  http.Get("/static/chart.js", [&ctx](const httplib::Request&, httplib::Response& res) {
    ServeFile(ctx, ctx.chartjs_path, "text/javascript; charset=utf-8", res);
  });
}

}  // namespace air::server
