// `air ui`'s private login file and opening it in a browser (see ui_login.h).
#include "runtime/ui_login.h"

#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "base/subprocess.h"
#include "runtime/tracking_link.h"
#include "tracking/http_client.h"
#include "tracking/server_files.h"

namespace air::runtime {
namespace {

constexpr char kLoginFilePrefix[] = "ui-login-";
constexpr char kLoginFileSuffix[] = ".html";

std::string Absolute(const std::string& path) {
  if (StartsWith(path, "/")) return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// file://<path>, with every byte but unreserved ones and '/' percent-encoded.
std::string FileUrl(const std::string& path) {
  std::string url = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
      url += static_cast<char>(c);
    } else {
      url += fmt::format("%{:02X}", c);
    }
  }
  return url;
}

// Removes the login files of earlier `air ui` calls whose codes have expired.
void RemoveExpiredLoginFiles(const std::string& dir, int64_t expires_in_s, Env* env) {
  auto names = env->ListDir(dir);
  if (!names.ok()) return;
  const int64_t cutoff = env->NowMicros() - expires_in_s * 1'000'000;
  for (const std::string& name : *names) {
    if (!StartsWith(name, kLoginFilePrefix) || !EndsWith(name, kLoginFileSuffix)) continue;
    auto modified = env->FileModifiedMicros(dir + "/" + name);
    if (modified.ok() && *modified < cutoff) (void)env->RemoveFile(dir + "/" + name);
  }
}

}  // namespace

Result<std::string> UiLoginPage(const std::string& login_url, int64_t expires_in_s) {
  // The URL goes into HTML attributes: it may only hold what a server URL and a hex code do.
  if (login_url.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789:/.[]#=_-") != std::string::npos) {
    return InvalidArgument(fmt::format(
        "the air server's login address '{}' has characters a login page cannot carry (a "
        "server address is http://<host>:<port>)",
        login_url));
  }
  return fmt::format(
      "<!doctype html>\n<!-- air ui: opens the web UI once, within {0} minutes. Readable by you "
      "alone; do not share it. -->\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"referrer\" content=\"no-referrer\">\n"
      "<meta http-equiv=\"refresh\" content=\"0;url={1}\">\n<title>air: opening the web "
      "UI</title>\n</head>\n<body>\n<p>Opening <a href=\"{1}\">air's web UI</a>. This page logs a "
      "browser in once, within {0} minutes; run <code>air ui</code> again for another.</p>\n"
      "</body>\n</html>\n",
      expires_in_s / 60, login_url);
}

Result<UiLogin> NewUiLogin(const std::string& air_home, Env* env) {
  AIR_ASSIGN_OR_RETURN(std::string url, EnsureTrackingServer(air_home, env));
  tracking::ServerFiles files(air_home);
  AIR_ASSIGN_OR_RETURN(std::string token, tracking::ServerToken(files, env));
  tracking::Credentials credentials;
  credentials.token = token;
  tracking::HttpClient http;
  AIR_ASSIGN_OR_RETURN(tracking::HttpResponse response,
                       http.Request("POST", url + "/api/air/ui-login", "{}", credentials, 10000));
  auto body = nlohmann::json::parse(response.body, nullptr, false);
  if (response.status != 200 || !body.is_object() || !body["code"].is_string()) {
    return Unavailable(fmt::format("the air server at {} gave no login code (HTTP {}): {}", url,
                                   response.status, response.body.substr(0, 300)));
  }
  UiLogin login;
  login.url = url;
  login.expires_in_s = body.value("expires_in_s", int64_t{0});
  AIR_ASSIGN_OR_RETURN(std::string page, UiLoginPage(fmt::format("{}/login#code={}", url,
                                                                 body["code"].get<std::string>()),
                                                     login.expires_in_s));
  RemoveExpiredLoginFiles(files.dir, login.expires_in_s, env);
  login.login_file =
      Absolute(fmt::format("{}/{}{}{}", files.dir, kLoginFilePrefix, ::getpid(), kLoginFileSuffix));
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(login.login_file, page, 0600));
  login.login_file_url = FileUrl(login.login_file);
  return login;
}

Result<std::string> OpenInBrowser(const std::string& file_url, Env* env) {
  SubprocessOptions browser;
  browser.output_path = "/dev/null";
  std::string shown;
  if (auto command = env->GetEnv("BROWSER"); command && !Trim(*command).empty()) {
    // The URL is an argument of the shell, never part of the command text it parses.
    std::string line = *command;
    if (line.find("%s") == std::string::npos) line += " %s";
    for (size_t at = line.find("%s"); at != std::string::npos; at = line.find("%s", at + 4)) {
      line.replace(at, 2, "\"$1\"");
    }
    browser.argv = {"/bin/sh", "-c", line, "air-ui", file_url};
    shown = "$BROWSER (" + *command + ")";
  } else if (env->GetEnv("DISPLAY").value_or("").empty() &&
             env->GetEnv("WAYLAND_DISPLAY").value_or("").empty()) {
    return std::string();  // no display: nothing to open here
  } else {
    browser.argv = {"xdg-open", file_url};
    shown = "xdg-open";
  }
  Status started = StartDetachedSubprocess(browser);
  if (!started.ok()) {
    if (shown == "xdg-open" && started.code() == ErrorCode::kNotFound) return std::string();
    return Status(started.code(), "open the web UI with " + shown + ": " + started.message());
  }
  return shown;
}

}  // namespace air::runtime
