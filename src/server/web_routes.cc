// The web UI's files: /, /login and /runs/<id> serve web/index.html (one page; app.js reads
// the path), /static/<name> the files of web/ by a fixed list of names, /static/chart.js the
// Debian libjs-chart.js build. No path from a request reaches the file system. These files hold
// no data and are served without a session (server/access.h, IsUiPagePath); the data comes
// from the API, with the session as a header (web/session.js).
// Logging a browser in (server/access.h): POST /api/air/ui-login (with the token, never a
// session: `air ui`) returns a one-time code; POST /login {"code"} (from the page /login#code=C
// that `air ui`'s file opens) exchanges it for a session, which the page keeps.
// SendLoginNeededPage: the 401 a browser gets when it navigates to an API address.
#include <fmt/format.h>

#include "server/mlflow_json.h"
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

void Login(ServerContext& ctx, const httplib::ContentReader& reader, httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  auto body = ReadBody(reader, res, 4096);
  if (!body.ok()) return SendError(res, 400, "MALFORMED_REQUEST", body.status().message());
  auto request = ParseJsonObject(*body);
  if (!request.ok()) return SendError(res, 400, "MALFORMED_REQUEST", request.status().message());
  auto code = request->find("code");
  if (code == request->end() || !code->is_string()) {
    return SendError(res, 400, "INVALID_PARAMETER_VALUE",
                     "POST /login takes {\"code\": \"<the code of air ui's login file>\"}");
  }
  auto session = ctx.access.RedeemLoginCode(code->get<std::string>());
  if (!session) {
    return SendError(res, 401, "UNAUTHENTICATED",
                     "this login link was used already or has expired (a link works once, for 10 "
                     "minutes); run `air ui` on the server's machine for a new one");
  }
  SendJson(res, {{"session", *session}, {"expires_in_s", kSessionSeconds}});
}

}  // namespace

void SendLoginNeededPage(httplib::Response& res, const Refusal& refusal) {
  res.status = refusal.status;
  res.set_header("Content-Security-Policy", "default-src 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>air: log in</title>"
      "</head><body><h1>Log in to this air server</h1><p>This address is air's API: programs "
      "send the server's token (docs/tracking.md). To use the web UI in this browser, run "
      "<code>air ui</code> on the machine the server runs on and open what it prints; then "
      "go to <a href=\"/\">the runs page</a>.</p></body></html>",
      "text/html; charset=utf-8");
}

void RegisterWebRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/login", [&ctx](const httplib::Request&, httplib::Response& res,
                             const httplib::ContentReader& reader) { Login(ctx, reader, res); });
  http.Post("/api/air/ui-login", [&ctx](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
    if (!ctx.access.HasToken(req)) {
      CloseAfter(res);
      return SendError(res, 403, "PERMISSION_DENIED",
                       "login links are made with the server's token (`air ui`), not with a "
                       "browser session");
    }
    auto body = ReadBody(reader, res, 4096);
    if (!body.ok()) return SendError(res, 400, "MALFORMED_REQUEST", body.status().message());
    SendJson(res, {{"code", ctx.access.NewLoginCode()}, {"expires_in_s", kLoginCodeSeconds}});
  });
  auto index = [&ctx](const httplib::Request&, httplib::Response& res) {
    ServeFile(ctx, ctx.web_dir + "/index.html", "text/html; charset=utf-8", res);
  };
  http.Get("/", index);
  http.Get("/login", index);
  http.Get(R"(/runs/(\d+))", index);
  for (auto [name, type] : {std::pair{"app.js", "text/javascript; charset=utf-8"},
                            std::pair{"session.js", "text/javascript; charset=utf-8"},
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
