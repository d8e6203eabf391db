// TcpStoreServer and TcpStoreClient: PyTorch's TCPStore wire protocol (see tcp_store.h).
#include "engine/parallel/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

namespace air::engine::parallel {
namespace {

constexpr uint32_t kValidationMagic = 0x3C85F7CE;

enum class Query : uint8_t {
  kValidate = 0,
  kSet = 1,
  kCompareSet = 2,
  kGet = 3,
  kAdd = 4,
  kCheck = 5,
  kWait = 6,
  kGetNumKeys = 7,
  kDeleteKey = 8,
  kAppend = 9,
  kMultiGet = 10,
  kMultiSet = 11,
  kCancelWait = 12,
  kPing = 13,
};
constexpr uint8_t kReady = 0;         // CheckResponseType::READY
constexpr uint8_t kNotReady = 1;      // CheckResponseType::NOT_READY
constexpr uint8_t kStopWaiting = 0;   // WaitResponseType::STOP_WAITING
constexpr uint8_t kWaitCanceled = 1;  // WaitResponseType::WAIT_CANCELED

template <typename T>
void Put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}
void PutBytes(std::string& out, const std::string& bytes) {
  Put<uint64_t>(out, bytes.size());
  out += bytes;
}

// Reads one message from the front of a client's buffer; `ok` turns false when the buffer ends
// before the message does (wait for more bytes).
class Reader {
 public:
  explicit Reader(const std::string& buf) : buf_(buf) {}
  template <typename T>
  T Get() {
    T value{};
    if (!ok_ || buf_.size() - pos_ < sizeof(T)) {
      ok_ = false;
      return value;
    }
    std::memcpy(&value, buf_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string Bytes() {
    uint64_t n = Get<uint64_t>();
    if (!ok_ || buf_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    std::string s = buf_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool ok() const { return ok_; }
  size_t consumed() const { return pos_; }

 private:
  const std::string& buf_;
  size_t pos_ = 0;
  bool ok_ = true;
};

bool SendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// The server's state, touched only by its thread.
struct ServerState {
  std::map<std::string, std::string> data;
  std::map<int, std::string> inbox;              // fd -> bytes not yet parsed
  std::map<int, std::set<std::string>> waiting;  // fd -> keys its WAIT still needs
  std::map<int, bool> validated;

  bool Has(const std::string& key) const { return data.count(key) > 0; }

  // A key was set: answer the WAITs that it completes.
  void Wake(const std::string& key) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      it->second.erase(key);
      if (it->second.empty()) {
        std::string reply;
        Put<uint8_t>(reply, kStopWaiting);
        SendAll(it->first, reply);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Handles complete messages at the front of fd's inbox; false to drop the client.
  bool Handle(int fd) {
    std::string& buf = inbox[fd];
    while (!buf.empty()) {
      Reader r(buf);
      std::string reply;
      bool keep = Dispatch(fd, r, reply);
      if (!r.ok()) return true;  // incomplete: wait for more bytes
      if (!keep) return false;
      buf.erase(0, r.consumed());
      if (!reply.empty() && !SendAll(fd, reply)) return false;
    }
    return true;
  }

  bool Dispatch(int fd, Reader& r, std::string& reply) {
    auto q = static_cast<Query>(r.Get<uint8_t>());
    if (!r.ok()) return true;
    if (q != Query::kValidate && !validated[fd]) return false;
    switch (q) {
      case Query::kValidate: {
        uint32_t magic = r.Get<uint32_t>();
        if (r.ok()) validated[fd] = magic == kValidationMagic;
        return !r.ok() || magic == kValidationMagic;
      }
      case Query::kPing: {
        uint32_t nonce = r.Get<uint32_t>();
        Put<uint32_t>(reply, nonce);
        return true;
      }
      case Query::kSet: {
        std::string key = r.Bytes();
        std::string value = r.Bytes();
        if (!r.ok()) return true;
        data[key] = value;
        Wake(key);
        return true;
      }
      case Query::kCompareSet: {
        std::string key = r.Bytes();
        std::string expected = r.Bytes();
        std::string desired = r.Bytes();
        if (!r.ok()) return true;
        auto it = data.find(key);
        if (it == data.end()) {
          if (expected.empty()) {
            data[key] = desired;
            PutBytes(reply, desired);
            Wake(key);
          } else {
            PutBytes(reply, expected);
          }
        } else {
          if (it->second == expected) it->second = desired;
          PutBytes(reply, it->second);
        }
        return true;
      }
      case Query::kGet: {
        std::string key = r.Bytes();
        if (!r.ok()) return true;
        auto it = data.find(key);
        if (it == data.end()) return false;  // clients wait before they get
        PutBytes(reply, it->second);
        return true;
      }
      case Query::kAdd: {
        std::string key = r.Bytes();
        int64_t delta = r.Get<int64_t>();
        if (!r.ok()) return true;
        int64_t value = delta;
        if (auto it = data.find(key); it != data.end()) {
          value += std::strtoll(it->second.c_str(), nullptr, 10);
        }
        data[key] = std::to_string(value);
        Put<int64_t>(reply, value);
        Wake(key);
        return true;
      }
      case Query::kCheck:
      case Query::kWait: {
        uint64_t n = r.Get<uint64_t>();
        std::vector<std::string> keys;
        for (uint64_t i = 0; r.ok() && i < n; ++i) keys.push_back(r.Bytes());
        if (!r.ok()) return true;
        std::set<std::string> missing;
        for (const auto& k : keys) {
          if (!Has(k)) missing.insert(k);
        }
        if (q == Query::kCheck) {
          Put<uint8_t>(reply, missing.empty() ? kReady : kNotReady);
        } else if (missing.empty()) {
          Put<uint8_t>(reply, kStopWaiting);
        } else {
          waiting[fd] = std::move(missing);
        }
        return true;
      }
      case Query::kGetNumKeys:
        Put<int64_t>(reply, static_cast<int64_t>(data.size()));
        return true;
      case Query::kDeleteKey: {
        std::string key = r.Bytes();
        if (!r.ok()) return true;
        Put<int64_t>(reply, static_cast<int64_t>(data.erase(key)));
        return true;
      }
      case Query::kAppend: {
        std::string key = r.Bytes();
        std::string value = r.Bytes();
        if (!r.ok()) return true;
        data[key] += value;
        Wake(key);
        return true;
      }
      case Query::kMultiGet: {
        uint64_t n = r.Get<uint64_t>();
        std::vector<std::string> keys;
        for (uint64_t i = 0; r.ok() && i < n; ++i) keys.push_back(r.Bytes());
        if (!r.ok()) return true;
        for (const auto& k : keys) {
          auto it = data.find(k);
          if (it == data.end()) return false;
          PutBytes(reply, it->second);
        }
        return true;
      }
      case Query::kMultiSet: {
        uint64_t n = r.Get<uint64_t>();
        std::vector<std::pair<std::string, std::string>> kvs;
        for (uint64_t i = 0; r.ok() && i < n; ++i) {
          std::string k = r.Bytes();
          std::string v = r.Bytes();
          kvs.emplace_back(std::move(k), std::move(v));
        }
        if (!r.ok()) return true;
        for (auto& [k, v] : kvs) {
          data[k] = v;
          Wake(k);
        }
        return true;
      }
      case Query::kCancelWait:
        waiting.erase(fd);
        Put<uint8_t>(reply, kWaitCanceled);
        return true;
    }
    return false;  // an unknown query type
  }

  void Drop(int fd) {
    ::close(fd);
    inbox.erase(fd);
    waiting.erase(fd);
    validated.erase(fd);
  }
};

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) {
      return AlreadyExists(fmt::format(
          "port {} is in use on this host, so the rendezvous store cannot listen there; choose "
          "another MASTER_PORT (--master-port), or stop what holds it",
          port));
    }
    return ErrnoStatus(fmt::format("bind the rendezvous store to port {}", port), err);
  }
  if (::listen(fd, 1024) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("listen", err);
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("pipe", err);
  }
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(fd, ntohs(addr.sin_port), wake[0], wake[1]));
}

TcpStoreServer::TcpStoreServer(int listen_fd, int port, int wake_read, int wake_write)
    : listen_fd_(listen_fd), port_(port), wake_read_(wake_read), wake_write_(wake_write) {
  thread_ = std::thread([this] { Serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  (void)!::write(wake_write_, "x", 1);
  thread_.join();
  ::close(wake_write_);
  ::close(wake_read_);
  ::close(listen_fd_);
}

void TcpStoreServer::Serve() {
  ServerState state;
  std::vector<int> clients;
  while (true) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    for (int c : clients) fds.push_back({c, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) break;
    if (fds[0].revents & POLLIN) {
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        clients.push_back(c);
      }
    }
    std::vector<int> dropped;
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int c = fds[i].fd;
      char buf[65536];
      ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        dropped.push_back(c);
        continue;
      }
      state.inbox[c].append(buf, static_cast<size_t>(n));
      if (!state.Handle(c)) dropped.push_back(c);
    }
    for (int c : dropped) {
      state.Drop(c);
      clients.erase(std::remove(clients.begin(), clients.end(), c), clients.end());
    }
  }
  for (int c : clients) state.Drop(c);
}

// --- client ---

namespace {

// A socket whose local and peer addresses are the same: a TCP self-connection.
bool ConnectedToItself(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof(local), pl = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
  return ll == pl && std::memcmp(&local, &peer, ll) == 0;
}

}  // namespace

Result<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const std::string& host, int port, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds timeout) {
  const std::string address = fmt::format("{}:{}", host, port);
  const auto deadline = std::chrono::steady_clock::now() + connect_timeout;
  std::string last_error;
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
      return InvalidArgument(
          fmt::format("cannot resolve the rendezvous host {:?}: {}", host, ::gai_strerror(rc)));
    }
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        last_error = std::strerror(errno);
        ::close(fd);
        continue;
      }
      if (ConnectedToItself(fd)) {
        // Before the store listens, a retried connect to a local port can draw that very port
        // as its source and connect to itself (TCP simultaneous open), holding the port the
        // store is about to bind. Drop it and retry.
        last_error = "connected to itself: nothing listens there yet";
        ::close(fd);
        continue;
      }
      ::freeaddrinfo(res);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      timeval tv{};
      tv.tv_sec = timeout.count() / 1000;
      tv.tv_usec = (timeout.count() % 1000) * 1000;
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(fd, address, timeout));
      std::string hello;
      Put<uint8_t>(hello, static_cast<uint8_t>(Query::kValidate));
      Put<uint32_t>(hello, kValidationMagic);
      Put<uint8_t>(hello, static_cast<uint8_t>(Query::kPing));
      const uint32_t nonce = static_cast<uint32_t>(::getpid());
      Put<uint32_t>(hello, nonce);
      std::lock_guard<std::mutex> lock(client->mu_);
      uint32_t echoed = 0;
      Status greeted = client->SendLocked(hello);
      if (greeted.ok()) greeted = client->RecvLocked(&echoed, sizeof(echoed));
      if (!greeted.ok()) {
        return Unavailable(fmt::format(
            "{} accepted the connection but did not answer as a rendezvous store ({}); is "
            "another program listening on that port?",
            address, greeted.message()));
      }
      if (echoed != nonce) {
        return Unavailable(fmt::format("{} is not a rendezvous store (bad ping reply)", address));
      }
      return client;
    }
    ::freeaddrinfo(res);
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return DeadlineExceeded(fmt::format("could not reach the rendezvous store at {} within {} s: {}",
                                      address, connect_timeout.count() / 1000.0, last_error));
}

TcpStoreClient::~TcpStoreClient() { ::close(fd_); }

Status TcpStoreClient::Lost(const std::string& what, int err) const {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return DeadlineExceeded(fmt::format("the rendezvous store at {} did not answer {} within {} s",
                                        address_, what, timeout_.count() / 1000.0));
  }
  return Unavailable(fmt::format("lost the rendezvous store at {} ({}: {})", address_, what,
                                 err == 0 ? "connection closed" : std::strerror(err)));
}

Status TcpStoreClient::SendLocked(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Lost("send", n < 0 ? errno : 0);
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status TcpStoreClient::RecvLocked(void* data, size_t n) {
  char* p = static_cast<char*>(data);
  size_t off = 0;
  while (off < n) {
    ssize_t got = ::recv(fd_, p + off, n - off, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Lost("recv", got < 0 ? errno : 0);
    off += static_cast<size_t>(got);
  }
  return Status::Ok();
}

Result<std::string> TcpStoreClient::RecvBytesLocked() {
  uint64_t n = 0;
  AIR_RETURN_IF_ERROR(RecvLocked(&n, sizeof(n)));
  std::string s(n, '\0');
  if (n > 0) AIR_RETURN_IF_ERROR(RecvLocked(s.data(), n));
  return s;
}

Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  std::string msg;
  Put<uint8_t>(msg, static_cast<uint8_t>(Query::kSet));
  PutBytes(msg, key);
  PutBytes(msg, value);
  std::lock_guard<std::mutex> lock(mu_);
  return SendLocked(msg);
}

Result<std::optional<std::string>> TcpStoreClient::TryGet(const std::string& key) {
  AIR_ASSIGN_OR_RETURN(bool present, Check({key}));
  if (!present) return std::optional<std::string>();
  std::string msg;
  Put<uint8_t>(msg, static_cast<uint8_t>(Query::kGet));
  PutBytes(msg, key);
  std::lock_guard<std::mutex> lock(mu_);
  AIR_RETURN_IF_ERROR(SendLocked(msg));
  AIR_ASSIGN_OR_RETURN(std::string value, RecvBytesLocked());
  return std::optional<std::string>(std::move(value));
}

Result<std::string> TcpStoreClient::Get(const std::string& key) {
  AIR_RETURN_IF_ERROR(Wait({key}));
  AIR_ASSIGN_OR_RETURN(std::optional<std::string> value, TryGet(key));
  if (!value) return Internal(fmt::format("rendezvous key {:?} vanished", key));
  return *value;
}

Result<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  std::string msg;
  Put<uint8_t>(msg, static_cast<uint8_t>(Query::kAdd));
  PutBytes(msg, key);
  Put<int64_t>(msg, delta);
  std::lock_guard<std::mutex> lock(mu_);
  AIR_RETURN_IF_ERROR(SendLocked(msg));
  int64_t value = 0;
  AIR_RETURN_IF_ERROR(RecvLocked(&value, sizeof(value)));
  return value;
}

Result<std::string> TcpStoreClient::CompareSet(const std::string& key, const std::string& expected,
                                               const std::string& desired) {
  std::string msg;
  Put<uint8_t>(msg, static_cast<uint8_t>(Query::kCompareSet));
  PutBytes(msg, key);
  PutBytes(msg, expected);
  PutBytes(msg, desired);
  std::lock_guard<std::mutex> lock(mu_);
  AIR_RETURN_IF_ERROR(SendLocked(msg));
  return RecvBytesLocked();
}

Result<bool> TcpStoreClient::Check(const std::vector<std::string>& keys) {
  std::string msg;
  Put<uint8_t>(msg, static_cast<uint8_t>(Query::kCheck));
  Put<uint64_t>(msg, keys.size());
  for (const auto& k : keys) PutBytes(msg, k);
  std::lock_guard<std::mutex> lock(mu_);
  AIR_RETURN_IF_ERROR(SendLocked(msg));
  uint8_t reply = 0;
  AIR_RETURN_IF_ERROR(RecvLocked(&reply, sizeof(reply)));
  return reply == kReady;
}

Status TcpStoreClient::Wait(const std::vector<std::string>& keys,
                            std::optional<std::chrono::milliseconds> timeout) {
  const auto limit = timeout.value_or(timeout_);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool ready, Check(keys));
    if (ready) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded(fmt::format("rendezvous keys not set within {} s at {}",
                                          limit.count() / 1000.0, address_));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace air::engine::parallel
