// Host, authentication and browser checks, login codes and sessions (see access.h).
#include "server/access.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <cctype>

#include "base/strings.h"

namespace air::server {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  std::string hex(bytes * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(raw.data()),
                 raw.size());
  hex.pop_back();
  return hex;
}

// Constant-time comparison of a presented secret with the expected one.
bool SecretMatches(std::string_view presented, std::string_view expected) {
  if (expected.empty() || presented.size() != expected.size()) return false;
  return sodium_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

// The password of an "Authorization: Basic base64(user:password)" header, or "".
std::string BasicPassword(const std::string& auth) {
  if (!StartsWith(auth, "Basic ")) return "";
  std::string encoded = auth.substr(6);
  std::string decoded(encoded.size(), '\0');
  size_t length = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(decoded.data()), decoded.size(),
                        encoded.c_str(), encoded.size(), nullptr, &length, nullptr,
                        sodium_base64_VARIANT_ORIGINAL) != 0) {
    return "";
  }
  decoded.resize(length);
  size_t colon = decoded.find(':');
  return colon == std::string::npos ? "" : decoded.substr(colon + 1);
}

bool IsLoopbackName(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::string MediaType(const std::string& content_type) {
  return Lower(Trim(content_type.substr(0, content_type.find(';'))));
}

// A browser loading a page (a link, the address bar), not a script's request.
bool IsNavigation(const httplib::Request& req) {
  const std::string mode = Lower(req.get_header_value("Sec-Fetch-Mode"));
  if (!mode.empty()) return mode == "navigate";
  return StartsWith(Lower(req.get_header_value("Accept")), "text/html");
}

bool HasBody(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  std::string length = req.get_header_value("Content-Length");
  return !length.empty() && length.find_first_not_of('0') != std::string::npos;
}

Refusal Refuse(int status, const char* code, std::string message) {
  return Refusal{status, code, std::move(message)};
}

}  // namespace

std::string HostOfHostHeader(const std::string& header) {
  std::string_view h = Trim(header);
  std::string host;
  std::string_view rest;
  if (!h.empty() && h.front() == '[') {
    size_t close = h.find(']');
    if (close == std::string_view::npos) return "";
    host = std::string(h.substr(1, close - 1));
    rest = h.substr(close + 1);
  } else {
    size_t colon = h.find(':');
    host = std::string(h.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : h.substr(colon);
  }
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() == 1 || rest.size() > 6 ||
        rest.substr(1).find_first_not_of("0123456789") != std::string_view::npos) {
      return "";
    }
  }
  if (host.empty()) return "";
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '_') {
      return "";
    }
  }
  return Lower(host);
}

bool IsIpLiteral(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

bool IsUiPagePath(const std::string& path) {
  if (path == "/" || path == "/login") return true;
  if (StartsWith(path, "/static/")) return path.find('/', 8) == std::string::npos;
  if (!StartsWith(path, "/runs/") || path.size() == 6) return false;
  return path.find_first_not_of("0123456789", 6) == std::string::npos;
}

Access::Access(std::string token, std::vector<std::string> host_names, bool any_ip_literal,
               Env* env)
    : token_(std::move(token)), any_ip_literal_(any_ip_literal), env_(env) {
  if (sodium_init() < 0) std::abort();  // a broken libsodium install: nothing can be checked
  session_key_ = RandomHex(32);
  for (const std::string& name : host_names) {
    if (!name.empty()) host_names_.push_back(Lower(name));
  }
}

std::optional<Refusal> Access::CheckHost(const httplib::Request& req) const {
  if (req.get_header_value_count("Host") != 1) {
    return Refuse(400, "BAD_REQUEST", "a request needs exactly one Host header");
  }
  std::string host = HostOfHostHeader(req.get_header_value("Host"));
  if (host.empty()) return Refuse(400, "BAD_REQUEST", "the Host header is malformed");
  if (IsLoopbackName(host)) return std::nullopt;
  if (std::find(host_names_.begin(), host_names_.end(), host) != host_names_.end()) {
    return std::nullopt;
  }
  if (any_ip_literal_ && IsIpLiteral(host)) return std::nullopt;
  return Refuse(403, "PERMISSION_DENIED",
                fmt::format("the Host '{}' does not name this air server (a page that points its "
                            "own name at this machine is refused); use the address `air ui` "
                            "prints",
                            host));
}

bool Access::HasToken(const httplib::Request& req) const {
  std::string auth = req.get_header_value("Authorization");
  if (StartsWith(auth, "Bearer ") && SecretMatches(Trim(auth.substr(7)), token_)) return true;
  // Basic auth with the token as the password, any user name (MLFLOW_TRACKING_USERNAME and
  // MLFLOW_TRACKING_PASSWORD for the mlflow client).
  std::string password = BasicPassword(auth);
  return !password.empty() && SecretMatches(password, token_);
}

bool Access::Authenticated(const httplib::Request& req) const {
  if (HasToken(req)) return true;
  return req.get_header_value_count(kSessionHeader) == 1 &&
         ValidSession(req.get_header_value(kSessionHeader));
}

std::optional<Refusal> Access::CheckBrowserSafety(const httplib::Request& req) const {
  const std::string& method = req.method;
  const bool writes =
      method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
  if (method == "OPTIONS") {
    return Refuse(405, "BAD_REQUEST",
                  "air server answers no cross-origin (CORS) requests: use it from its own pages "
                  "or from a program");
  }
  if (!writes && method != "GET" && method != "HEAD") {
    return Refuse(405, "BAD_REQUEST", fmt::format("method {} is not served", method));
  }
  if ((!writes || method == "DELETE") && HasBody(req)) {
    return Refuse(
        400, "BAD_REQUEST",
        fmt::format("a {} request carries no body; send its fields in the query string", method));
  }
  if (!writes) return std::nullopt;
  // A browser names the page that sent the request; it must be one of this server's.
  const std::string origin = req.get_header_value("Origin");
  if (req.has_header("Origin") &&
      Lower(origin) != "http://" + Lower(Trim(req.get_header_value("Host")))) {
    return Refuse(403, "PERMISSION_DENIED",
                  fmt::format("cross-origin request refused: a page at '{}' may not change this "
                              "server's data",
                              origin));
  }
  const std::string site = Lower(req.get_header_value("Sec-Fetch-Site"));
  if (!site.empty() && site != "same-origin" && site != "none") {
    return Refuse(403, "PERMISSION_DENIED",
                  fmt::format("cross-origin request refused (Sec-Fetch-Site: {})", site));
  }
  if ((method == "POST" || method == "PATCH") &&
      MediaType(req.get_header_value("Content-Type")) != "application/json") {
    return Refuse(415, "BAD_REQUEST",
                  fmt::format("{} requests must be JSON: send 'Content-Type: application/json' "
                              "(got '{}')",
                              method, req.get_header_value("Content-Type")));
  }
  return std::nullopt;
}

std::optional<Refusal> Access::Admit(const httplib::Request& req) const {
  if (auto refused = CheckHost(req)) return refused;
  const bool open = req.method == "POST"
                        ? req.path == "/login"
                        : (req.method == "GET" || req.method == "HEAD") && IsUiPagePath(req.path);
  if (!open && !Authenticated(req)) {
    Refusal refusal = Refuse(
        401, "UNAUTHENTICATED",
        "this air server needs its access token: send 'Authorization: Bearer <token>' "
        "(MLFLOW_TRACKING_TOKEN for the mlflow client), or basic auth with the token as the "
        "password; in a browser, run `air ui` on the server's machine and open what it prints");
    refusal.page = IsNavigation(req);
    return refusal;
  }
  return CheckBrowserSafety(req);
}

std::string Access::NewLoginCode() {
  std::string code = RandomHex(32);
  const int64_t now = env_->MonotonicMicros();
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(login_codes_, [now](const auto& entry) { return entry.second <= now; });
  while (login_codes_.size() >= 1000) login_codes_.erase(login_codes_.begin());
  login_codes_[code] = now + kLoginCodeSeconds * 1'000'000;
  return code;
}

std::optional<std::string> Access::RedeemLoginCode(const std::string& code) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = login_codes_.find(code);
    if (it == login_codes_.end()) return std::nullopt;
    const bool live = it->second > env_->MonotonicMicros();
    login_codes_.erase(it);
    if (!live) return std::nullopt;
  }
  const int64_t expires = env_->NowMicros() / 1'000'000 + kSessionSeconds;
  return SessionValue(expires, RandomHex(16));
}

std::string Access::SessionValue(int64_t expires_s, const std::string& nonce) const {
  const std::string body = fmt::format("v1.{}.{}", expires_s, nonce);
  const std::string message = "air-session:" + body;
  crypto_auth_hmacsha256_state state;
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(session_key_.data()),
                              session_key_.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(message.data()),
                                message.size());
  crypto_auth_hmacsha256_final(&state, mac);
  char hex[crypto_auth_hmacsha256_BYTES * 2 + 1];
  sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
  return body + "." + hex;
}

bool Access::ValidSession(const std::string& value) const {
  std::vector<std::string> parts = Split(value, '.');
  if (parts.size() != 4 || parts[0] != "v1" || parts[1].empty() ||
      parts[1].find_first_not_of("0123456789") != std::string::npos || parts[1].size() > 15) {
    return false;
  }
  const int64_t expires = std::stoll(parts[1]);
  if (expires <= env_->NowMicros() / 1'000'000) return false;
  return SecretMatches(value, SessionValue(expires, parts[2]));
}

}  // namespace air::server
