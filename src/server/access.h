// Who may use `air server`, decided before any handler runs and before a request body is read
// (docs/tracking.md, "Threat model"):
//
//   1. Host. The Host header must name this server: a loopback name or address, the address it
//      is bound to, config.yaml's advertise_host, this machine's name when it is bound to every
//      address, and (bound off loopback) any IP literal. A web page that rebinds its own DNS
//      name to 127.0.0.1 sends its name and is refused (403).
//   2. Authentication, on every route but the web UI's fixed files (IsUiPagePath) and the login
//      exchange, loopback included: the token of AIR_HOME/tracking/server.token as
//      "Authorization: Bearer" (MLFLOW_TRACKING_TOKEN) or as the password of basic auth
//      (MLFLOW_TRACKING_PASSWORD), or a browser session as the X-Air-Session header. Anything
//      else gets 401 (a browser navigating to an API address gets it as a page saying how to
//      log in). No cookie is ever set or read: a cookie of 127.0.0.1 would also go to every
//      other user's listener on another port of 127.0.0.1.
//   3. Browsers. A state-changing request (POST, PUT, PATCH, DELETE) that says where it comes
//      from (Origin, Sec-Fetch-Site) must come from this server's own origin; POST and PATCH
//      must carry JSON (a content type a plain HTML form or a "simple" cross-origin fetch cannot
//      send); no other method is served and no CORS header is ever sent.
//
// A session is "v1.<expiry>.<nonce>.<HMAC-SHA256(key, ...)>" under a key drawn at random when
// the server starts: valid for kSessionSeconds or until this server process ends, so a session
// left in a browser's storage is worth nothing to whoever serves the port after the server
// stopped. The web UI keeps it in its origin's localStorage (web/session.js). Login codes are
// 256-bit random, kept in memory, valid once for kLoginCodeSeconds; they are redeemed by
// POST /login, and only the token (never a session) gets new ones.
// Thread safety: Access is shared by the handler threads; the login codes are under a mutex.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"

namespace air::server {

inline constexpr int64_t kLoginCodeSeconds = 600;
inline constexpr int64_t kSessionSeconds = 7 * 24 * 3600;
inline constexpr char kSessionHeader[] = "X-Air-Session";

// Why a request is not served: the HTTP status, MLflow's error_code and a message.
struct Refusal {
  int status = 0;
  std::string error_code;
  std::string message;
  bool page = false;  // a browser's navigation: answer with a page that says how to log in
};

class Access {
 public:
  // `host_names`: the names (besides loopback ones) a Host header may carry;
  // `any_ip_literal`: bound off loopback, so nodes may use any of the machine's addresses.
  Access(std::string token, std::vector<std::string> host_names, bool any_ip_literal, Env* env);

  // Step 1: nullopt when the Host header names this server.
  std::optional<Refusal> CheckHost(const httplib::Request& req) const;
  // Step 2: true when the request carries the token or a valid session header.
  bool Authenticated(const httplib::Request& req) const;
  // The token itself (Bearer or basic auth), not a session: what may mint login codes.
  bool HasToken(const httplib::Request& req) const;
  // Step 3 (method, Origin, content type), for an authenticated request.
  std::optional<Refusal> CheckBrowserSafety(const httplib::Request& req) const;
  // The three in order, and the 401 in between. The UI's page files (GET) and the login
  // exchange (POST /login) are let through unauthenticated.
  std::optional<Refusal> Admit(const httplib::Request& req) const;

  // A fresh one-time login code (hex).
  std::string NewLoginCode();
  // A new session when `code` is a live code (which it uses up).
  std::optional<std::string> RedeemLoginCode(const std::string& code);

  // A session for an expiry time (seconds since the epoch) and nonce.
  std::string SessionValue(int64_t expires_s, const std::string& nonce) const;
  bool ValidSession(const std::string& value) const;

 private:
  std::string token_;
  std::string session_key_;              // random, this process's only
  std::vector<std::string> host_names_;  // lowercase
  bool any_ip_literal_;
  Env* env_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> login_codes_;  // code -> expiry (monotonic us)
};

// The host part of a Host header ("[::1]:80" -> "::1", "Name:80" -> "name"); "" when malformed.
std::string HostOfHostHeader(const std::string& header);
bool IsIpLiteral(const std::string& host);
// The web UI's page files, the same for everyone and holding no data: "/", "/login",
// "/runs/<id>" (index.html) and "/static/<name>" (web_routes.cc serves a fixed list).
bool IsUiPagePath(const std::string& path);

}  // namespace air::server
