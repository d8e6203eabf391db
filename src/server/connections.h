// Connections of `air server`, bounded before anyone is authenticated, so that other users of a
// shared login node (opening sockets and sending nothing, or a byte every few seconds, or an
// endless head) cannot take every handler thread or the server's memory, and the owner's
// /health and requests are still served.
//
// A client is the local user (uid) behind a loopback connection, found from the kernel's
// socket table (sock_diag, what `ss -e` shows), or the peer's IP address for any other. The
// server holds at most `max_connections` (64) connections at once, each on a handler thread;
// `owner_reserve` (16) of them only the server's own user can take, so other clients together
// hold at most 48, and one of them at most `per_client` (32): two other users cannot fill the
// server. A connection over a limit gets an immediate 429 that names the limit, and is closed
// without reading from it (the pool has kRefusalThreads more threads than max_connections, so
// the refusal never waits behind held connections). Each read waits at most `read_timeout`, an
// idle keep-alive connection at most `keep_alive_timeout`, and each request head is read whole
// first, within the limits of server/request_head.h (431 / 408 and close past them).
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

// The client key of the server's own user: "uid:<effective uid>".
std::string OwnerClientKey();

// Handler threads beyond max_connections: they answer connections over a limit.
constexpr int kRefusalThreads = 4;

class ConnectionLimiter {
 public:
  ConnectionLimiter(const ConnectionLimits& limits, std::string owner)
      : limits_(limits), owner_(std::move(owner)) {}
  // Empty when `client` may hold one more connection (Release it after); else why not, naming
  // the limit.
  std::string TryAcquire(const std::string& client);
  void Release(const std::string& client);
  int Held(const std::string& client);

 private:
  const ConnectionLimits limits_;
  const std::string owner_;
  std::mutex mu_;
  std::map<std::string, int> held_;
  int held_by_all_ = 0;
  int held_by_others_ = 0;  // clients other than owner_
};

class LimitedServer : public httplib::Server {
 public:
  explicit LimitedServer(const ConnectionLimits& limits);

  // listen_after_bind() with the listening socket's backlog widened to SOMAXCONN first: httplib
  // listens with 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled in), so a burst of connections past it
  // would wait for the clients' SYN retries (1 s, then 3 s, ...) before reaching the limits.
  bool ListenAfterBind();

 private:
  bool process_and_close_socket(socket_t sock) override;
  ConnectionLimits limits_;
  ConnectionLimiter limiter_;
};

}  // namespace air::server
