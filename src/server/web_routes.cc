// The web UI's files: / and /runs/<id> serve web/index.html (one page; app.js reads the path),
// /static/<name> the files of web/ by a fixed list of names, /static/chart.js the Debian
// libjs-chart.js build. No path from a request reaches the file system.
// Logging a browser in (server/access.h): POST /api/air/ui-login (with the token: `air ui`)
// returns a one-time code; GET /login?code=... exchanges it for the session cookie and
// redirects to the runs page.
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

void Login(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("Referrer-Policy", "no-referrer");
  auto cookie = ctx.access.RedeemLoginCode(req.get_param_value("code"));
  if (!cookie) {
    if (ctx.access.Authenticated(req)) return res.set_redirect("/", 303);  // logged in already
    return SendError(res, 401, "UNAUTHENTICATED",
                     "this login link was used already or has expired (a link works once, for 10 "
                     "minutes); run `air ui` on the server's machine for a new one");
  }
  res.set_header("Set-Cookie", *cookie);
  res.set_redirect("/", 303);
}

}  // namespace

void RegisterWebRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get("/login",
           [&ctx](const httplib::Request& req, httplib::Response& res) { Login(ctx, req, res); });
  http.Post("/api/air/ui-login", [&ctx](const httplib::Request&, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
    auto body = ReadBody(reader, res, 4096);
    if (!body.ok()) return SendError(res, 400, "MALFORMED_REQUEST", body.status().message());
    SendJson(res, {{"code", ctx.access.NewLoginCode()}, {"expires_in_s", kLoginCodeSeconds}});
  });
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
