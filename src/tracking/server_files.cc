// Reading and writing AIR_HOME/tracking/server.json.
#include "tracking/server_files.h"

#include <fmt/format.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/strings.h"

namespace air::tracking {

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || StartsWith(host, "127.");
}

Result<std::string> ServerToken(const ServerFiles& files, Env* env) {
  auto read = [&]() -> std::optional<std::string> {
    auto existing = env->ReadFile(files.TokenPath());
    if (!existing.ok() || existing->empty()) return std::nullopt;
    std::string token = *existing;
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    return token;
  };
  if (auto token = read()) return *token;
  if (sodium_init() < 0) return Internal("libsodium failed to initialize");
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof(bytes));
  char hex[65];
  sodium_bin2hex(hex, sizeof(hex), bytes, sizeof(bytes));
  AIR_RETURN_IF_ERROR(env->CreateDirs(files.dir, 0700));
  // Written whole under a private name, then linked into place only if no other process (an
  // `air run` and an `air ui` starting at once) got there first: everyone reads one token.
  const std::string temp = fmt::format("{}.{}.{}", files.TokenPath(), ::getpid(), hex + 56);
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(temp, std::string(hex) + "\n", 0600));
  const bool linked = ::link(temp.c_str(), files.TokenPath().c_str()) == 0;
  const int err = errno;
  ::unlink(temp.c_str());
  if (!linked && err != EEXIST) return ErrnoStatus("create " + files.TokenPath(), err);
  if (auto token = read()) return *token;
  return Internal("cannot read back " + files.TokenPath());
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
