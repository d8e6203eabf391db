// Connections of `air server`, bounded per client so that one client (say, another user of a
// shared login node opening sockets and sending nothing) cannot take every handler thread and
// stall /health or the owner's requests.
//
// A client is the local user (uid) behind a loopback connection, found from the kernel's
// socket table (sock_diag, what `ss -e` shows), or the peer's IP address for any other. Each
// client holds at most `per_client` connections at once; a connection over that gets an
// immediate 429 and is closed without reading from it. Each read waits at most `read_timeout`
// (a silent or half-open socket is dropped after it) and an idle keep-alive connection at most
// `keep_alive_timeout`.
//
// LimitedServer replaces httplib's per-connection loop (process_and_close_socket) with one that
// applies these limits and closes a connection after any response that says
// "Connection: close" (a refused request whose body was never read), lingering to drop up to
// 64 MiB of that body first so that the client still gets the answer.
// Thread safety: ConnectionLimiter is internally locked; LimitedServer is an httplib::Server.
#pragma once

#include <httplib.h>

#include <map>
#include <mutex>
#include <string>

#include "server/server.h"

namespace air::server {

// "uid:<n>" for a loopback peer whose socket the kernel can name, else "ip:<address>".
std::string ClientKeyOf(int socket_fd);

class ConnectionLimiter {
 public:
  explicit ConnectionLimiter(int per_client) : per_client_(per_client) {}
  bool TryAcquire(const std::string& client);
  void Release(const std::string& client);
  int Held(const std::string& client);

 private:
  const int per_client_;
  std::mutex mu_;
  std::map<std::string, int> held_;
};

class LimitedServer : public httplib::Server {
 public:
  explicit LimitedServer(const ConnectionLimits& limits);

 private:
  bool process_and_close_socket(socket_t sock) override;
  ConnectionLimits limits_;
  ConnectionLimiter limiter_;
};

}  // namespace air::server
