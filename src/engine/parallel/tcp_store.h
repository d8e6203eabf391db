// A rendezvous key-value store over TCP that speaks PyTorch's TCPStore wire protocol: the store
// at MASTER_ADDR:MASTER_PORT through which ranks (and air launch's node agents) find each other.
//
// Why a store of our own: libgloo-dev ships only file, hash, prefix and Redis stores (no TCP
// store; Gloo's own docs leave rendezvous to the caller, and PyTorch keeps its TCPStore in
// libtorch). Why PyTorch's protocol: under the real `torchrun`, workers are told
// TORCHELASTIC_USE_AGENT_STORE=True and must join the agent's TCPStore as clients; speaking the
// same protocol lets air workers run under torchrun, and torch workers run under `air launch`
// with the store hosted by air. Only the subset both sides use is implemented: VALIDATE, SET,
// COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY, APPEND, MULTI_GET, MULTI_SET,
// PING (framing: a 1-byte query type, strings and byte vectors as a u64 length then the bytes,
// integers little-endian).
//
// TcpStoreServer owns a listening socket and one thread that serves every client (poll loop);
// it stops and closes its clients when destroyed. TcpStoreClient is one connection; its calls
// are serialized by a mutex, so it may be shared by threads. Waits poll CHECK on the client side
// so that every call ends by its deadline, and a lost server is an error, never a hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace air::engine::parallel {

class TcpStoreServer {
 public:
  // Listens on every interface at `port` (0: a free port, see port()). A port in use is
  // kAlreadyExists naming it.
  static Result<std::unique_ptr<TcpStoreServer>> Start(int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  TcpStoreServer(int listen_fd, int port, int wake_read, int wake_write);
  void Serve();

  int listen_fd_;
  int port_;
  int wake_read_;
  int wake_write_;
  std::thread thread_;
};

class TcpStoreClient {
 public:
  // Connects to host:port, retrying refused connections until `connect_timeout` passes (the
  // server may start later). `timeout` bounds every later call, including Wait.
  static Result<std::unique_ptr<TcpStoreClient>> Connect(const std::string& host, int port,
                                                         std::chrono::milliseconds connect_timeout,
                                                         std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  Status Set(const std::string& key, const std::string& value);
  // Waits (up to the client's timeout) for the key, then returns its value.
  Result<std::string> Get(const std::string& key);
  // The value now, or nullopt when the key is not set.
  Result<std::optional<std::string>> TryGet(const std::string& key);
  Result<int64_t> Add(const std::string& key, int64_t delta);
  // Sets key to `desired` when its value is `expected` ("" = unset); returns the value after.
  Result<std::string> CompareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired);
  Result<bool> Check(const std::vector<std::string>& keys);
  // Waits until every key is set; kDeadlineExceeded after `timeout` (the client's when unset).
  Status Wait(const std::vector<std::string>& keys,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  const std::string& address() const { return address_; }  // "host:port", for messages
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  TcpStoreClient(int fd, std::string address, std::chrono::milliseconds timeout)
      : fd_(fd), address_(std::move(address)), timeout_(timeout) {}
  Status SendLocked(const std::string& bytes);
  Status RecvLocked(void* data, size_t n);
  Result<std::string> RecvBytesLocked();
  Status Lost(const std::string& what, int err) const;

  std::mutex mu_;
  int fd_;
  std::string address_;
  std::chrono::milliseconds timeout_;
};

}  // namespace air::engine::parallel
