// Reading and writing AIR_HOME/tracking/server.json.
#include "tracking/server_files.h"

#include <sodium.h>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/private_dir.h"
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
  AIR_RETURN_IF_ERROR(MakePrivateDir(files.dir, env));
  // Written whole under a random temporary name (nothing of the token in it), then renamed
  // into place only if no other process (an `air run` and an `air ui` starting at once) got
  // there first: everyone reads one token.
  AtomicFileWriter writer(env, files.TokenPath(), 0600);
  AIR_RETURN_IF_ERROR(writer.Open());
  AIR_RETURN_IF_ERROR(writer.Append(std::string(hex) + "\n"));
  sodium_memzero(hex, sizeof(hex));
  if (Status placed = writer.CommitNoReplace();
      !placed.ok() && placed.code() != ErrorCode::kAlreadyExists) {
    return placed;
  }
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
  AIR_RETURN_IF_ERROR(MakePrivateDir(files.dir, env));
  return env->WriteFileAtomic(files.InfoPath(), j.dump() + "\n", 0600);
}

}  // namespace air::tracking
