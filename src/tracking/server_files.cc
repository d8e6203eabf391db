// Reading and writing AIR_HOME/tracking/server.json.
#include "tracking/server_files.h"

#include <sodium.h>

#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace air::tracking {

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || StartsWith(host, "127.");
}

Result<std::string> ServerToken(const ServerFiles& files, Env* env) {
  if (auto existing = env->ReadFile(files.TokenPath()); existing.ok() && !existing->empty()) {
    std::string token = *existing;
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    return token;
  }
  if (sodium_init() < 0) return Internal("libsodium failed to initialize");
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof(bytes));
  char hex[65];
  sodium_bin2hex(hex, sizeof(hex), bytes, sizeof(bytes));
  AIR_RETURN_IF_ERROR(env->CreateDirs(files.dir, 0700));
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(files.TokenPath(), std::string(hex) + "\n", 0600));
  return std::string(hex);
}

std::optional<ServerInfo> ReadServerInfo(const ServerFiles& files, Env* env) {
  auto text = env->ReadFile(files.InfoPath());
  if (!text.ok()) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  ServerInfo info;
  info.pid = j.value("pid", int64_t{0});
  info.host = j.value("host", std::string());
  info.port = j.value("port", 0);
  info.url = j.value("url", std::string());
  info.token_required = j.value("token_required", false);
  if (info.port <= 0 || info.url.empty()) return std::nullopt;
  return info;
}

Status WriteServerInfo(const ServerFiles& files, const ServerInfo& info, Env* env) {
  nlohmann::json j = {{"pid", info.pid},
                      {"host", info.host},
                      {"port", info.port},
                      {"url", info.url},
                      {"token_required", info.token_required}};
  AIR_RETURN_IF_ERROR(env->CreateDirs(files.dir, 0700));
  return env->WriteFileAtomic(files.InfoPath(), j.dump() + "\n", 0600);
}

}  // namespace air::tracking
