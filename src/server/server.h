// `air server`: one HTTP server per AIR_HOME (cpp-httplib) serving MLflow's tracking REST API
// over air's store (server/mlflow_routes.cc, server/artifact_routes.cc), air's own JSON API
// (server/air_routes.cc) and the web UI (server/web_routes.cc, files from web/). It binds
// 127.0.0.1 by default. Every request, on loopback too, must carry the access token
// (Authorization: Bearer, as the mlflow client sends MLFLOW_TRACKING_TOKEN; or basic auth with the
// token as the password, MLFLOW_TRACKING_PASSWORD) or a browser session from `air ui`'s login
// link, name the server in its Host header, and obey the browser rules of server/access.h;
// connections are bounded per client and in all, and request heads in size and time, before
// authentication (server/connections.h). While it runs it
// holds AIR_HOME/tracking/server.lock and describes itself in AIR_HOME/tracking/server.json
// (tracking/server_files.h), which `air run` and `air ui` read to find it.
// Thread safety: RunServer serves requests on a pool of threads, one store connection each.
#pragma once

#include <functional>
#include <string>

#include "base/env.h"
#include "base/status.h"
#include "server/request_head.h"

namespace air::server {

// What one connection and its clients may hold (server/connections.h): connections at once (all
// clients; other clients together, leaving `owner_reserve` to the server's own user; one other
// client), how long a read, a write and an idle keep-alive connection may wait, and the request
// head read before authentication (server/request_head.h).
struct ConnectionLimits {
  int max_connections = 64;  // a handler thread each; a few more threads refuse the rest
  int owner_reserve = 16;    // of max_connections, only the server's own user (uid) gets
  int per_client = 32;       // a client other than the server's own user
  int read_timeout_s = 10;
  int write_timeout_s = 10;
  int keep_alive_timeout_s = 5;
  HeadLimits head;
};

struct ServerOptions {
  std::string air_home;
  std::string host = "127.0.0.1";
  int port = 0;                // 0: the port it had last time when free, else any free port
  std::string advertise_host;  // config.yaml's: a name the Host header may carry
  std::string token;           // required on every request (never logged)
  ConnectionLimits limits;     // connections, timeouts, request heads
  // > 0: exit after this long without a request while no run of AIR_HOME is live (the
  // on-demand daemon; the next command starts it again). Also exits when its server.json is
  // gone or names another process (AIR_HOME removed or taken over).
  int idle_exit_seconds = 0;
};

// Serves until SIGTERM or SIGINT. kAlreadyExists when another server holds this AIR_HOME.
// `on_listening` (optional) is called with the URL once the port is bound and server.json
// written.
Status RunServer(const ServerOptions& options, Env* env,
                 const std::function<void(const std::string& url)>& on_listening = nullptr);

}  // namespace air::server
