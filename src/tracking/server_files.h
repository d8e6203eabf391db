// Where the tracking server of an AIR_HOME keeps its state, and how clients find it:
//
//   AIR_HOME/tracking/server.json    {"pid", "host", "port", "url", "token_required"}, written
//                                    atomically once the server listens; kept after it exits
//                                    (its port is preferred on restart)
//   AIR_HOME/tracking/server.lock    flock()ed by the running server: one server per AIR_HOME
//   AIR_HOME/tracking/server.log     the detached server's stdout and stderr
//   AIR_HOME/tracking/server.token   the access token (mode 0600) every request needs
//   AIR_HOME/tracking/artifacts/     run artifacts: <experiment_id>/<run_id>/artifacts/...
//
// Thread safety: pure functions and a value type.
#pragma once

#include <optional>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::tracking {

struct ServerFiles {
  explicit ServerFiles(const std::string& air_home) : dir(air_home + "/tracking") {}
  std::string dir;
  std::string InfoPath() const { return dir + "/server.json"; }
  std::string LockPath() const { return dir + "/server.lock"; }
  std::string LogPath() const { return dir + "/server.log"; }
  std::string TokenPath() const { return dir + "/server.token"; }
  std::string ArtifactsDir() const { return dir + "/artifacts"; }
};

struct ServerInfo {
  int64_t pid = 0;
  std::string host;
  int port = 0;
  std::string url;             // http://host:port
  bool token_required = true;  // always, since loopback is shared by every local user
};

// True for 127.0.0.0/8, ::1 and "localhost": only this machine can connect (but any user on it).
bool IsLoopbackHost(const std::string& host);

// The server's access token (server.token), created when missing (32 random bytes, hex, mode
// 0600). Never printed or logged.
Result<std::string> ServerToken(const ServerFiles& files, Env* env);

// nullopt when there is no (readable) server.json.
std::optional<ServerInfo> ReadServerInfo(const ServerFiles& files, Env* env);
Status WriteServerInfo(const ServerFiles& files, const ServerInfo& info, Env* env);

}  // namespace air::tracking
