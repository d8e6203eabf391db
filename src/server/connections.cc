// Per-client connection limits and the connection loop (see connections.h).
#include "server/connections.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace air::server {
namespace {

// An address of either family, with IPv4-mapped IPv6 addresses turned into IPv4.
struct Endpoint {
  int family = 0;
  unsigned char addr[16] = {};
  uint16_t port = 0;  // host order
};

std::optional<Endpoint> ToEndpoint(const sockaddr_storage& ss) {
  Endpoint e;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    e.family = AF_INET;
    std::memcpy(e.addr, &in->sin_addr, 4);
    e.port = ntohs(in->sin_port);
    return e;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    e.port = ntohs(in6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      e.family = AF_INET;
      std::memcpy(e.addr, in6->sin6_addr.s6_addr + 12, 4);
    } else {
      e.family = AF_INET6;
      std::memcpy(e.addr, in6->sin6_addr.s6_addr, 16);
    }
    return e;
  }
  return std::nullopt;
}

bool IsLoopback(const Endpoint& e) {
  if (e.family == AF_INET) return e.addr[0] == 127;
  static const unsigned char kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(e.addr, kLoopback6, 16) == 0;
}

std::string AddressText(const Endpoint& e) {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(e.family, e.addr, text, sizeof(text));
  return text;
}

// The owner of the client's end of a loopback TCP connection: the kernel's socket table looked
// up by the exact 4-tuple (sock_diag), as `ss -e` shows it.
std::optional<uint32_t> LoopbackPeerUid(const Endpoint& peer, const Endpoint& local) {
  int nl = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return std::nullopt;
  timeval timeout{1, 0};
  ::setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof(message);
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.request.sdiag_family = static_cast<uint8_t>(peer.family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0u;
  // The client's socket: its source is the peer, its destination this server.
  message.request.id.idiag_sport = htons(peer.port);
  message.request.id.idiag_dport = htons(local.port);
  const size_t length = peer.family == AF_INET ? 4 : 16;
  std::memcpy(message.request.id.idiag_src, peer.addr, length);
  std::memcpy(message.request.id.idiag_dst, local.addr, length);
  message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<uint32_t> uid;
  if (::sendto(nl, &message, sizeof(message), 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof(kernel)) == static_cast<ssize_t>(sizeof(message))) {
    alignas(nlmsghdr) char reply[8192];
    ssize_t n = ::recv(nl, reply, sizeof(reply), 0);
    auto* header = reinterpret_cast<nlmsghdr*>(reply);
    if (n > 0 && NLMSG_OK(header, static_cast<size_t>(n)) &&
        header->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      uid = static_cast<const inet_diag_msg*>(NLMSG_DATA(header))->idiag_uid;
    }
  }
  ::close(nl);
  return uid;
}

// httplib's Stream over a socket, with a read buffer (httplib reads request lines a byte at a
// time) that first takes in a whole request head within its limits (ReadHead), poll-based
// timeouts, and a note of whether the last response said "Connection: close".
class SocketStream : public httplib::Stream {
 public:
  // `listening` is the server's listening socket, INVALID_SOCKET once it stops: waits end then.
  SocketStream(int fd, const ConnectionLimits& limits, const std::atomic<socket_t>& listening)
      : fd_(fd), limits_(limits), listening_(listening) {}

  bool WaitReadable(int seconds) const { return buffered() > 0 || Poll(POLLIN, seconds * 1000); }
  void StartRequest() { said_close_ = false; }
  bool said_close() const { return said_close_; }

  // Reads until the buffer holds the next request's whole head (kComplete), the head is over
  // its limits (kTooLarge), or it is not (kIncomplete): the client closed, the server stops,
  // or the deadline passed (head_timed_out()). Call when a byte is readable or buffered.
  HeadScanner::State ReadHead(const HeadLimits& limits) {
    head_timed_out_ = false;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(limits.deadline_s);
    HeadScanner scanner(limits);
    if (scanner.Feed(Buffered()) != HeadScanner::State::kIncomplete) return scanner.state();
    // What was read already (the previous request) makes room for the rest of this head.
    buffer_.erase(0, begin_);
    begin_ = 0;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) {
        head_timed_out_ = true;
        return HeadScanner::State::kIncomplete;
      }
      if (!Poll(POLLIN, static_cast<int>(left))) {
        head_timed_out_ = listening_ != INVALID_SOCKET;
        return HeadScanner::State::kIncomplete;
      }
      char chunk[kChunkBytes];
      const ssize_t n = Receive(chunk, sizeof(chunk));
      if (n <= 0) return HeadScanner::State::kIncomplete;
      buffer_.append(chunk, static_cast<size_t>(n));
      if (scanner.Feed({chunk, static_cast<size_t>(n)}) != HeadScanner::State::kIncomplete) {
        return scanner.state();
      }
    }
  }
  bool head_timed_out() const { return head_timed_out_; }

  // Writes all of `data` (a refusal of the server's own) within the write timeout.
  void WriteAll(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = write(data.data(), data.size());
      if (n <= 0) return;
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  bool is_readable() const override { return WaitReadable(limits_.read_timeout_s); }
  bool is_writable() const override { return Poll(POLLOUT, limits_.write_timeout_s * 1000); }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered() == 0) {
      if (!Poll(POLLIN, limits_.read_timeout_s * 1000)) return -1;
      // A body larger than a chunk is passed through without copying.
      if (size >= kChunkBytes) return Receive(ptr, size);
      buffer_.resize(kChunkBytes);
      const ssize_t n = Receive(buffer_.data(), kChunkBytes);
      buffer_.resize(n > 0 ? static_cast<size_t>(n) : 0);
      begin_ = 0;
      if (n <= 0) return n;
    }
    size_t n = std::min(size, buffered());
    std::memcpy(ptr, buffer_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    std::string_view data(ptr, size);
    if (data.substr(0, 9) == "HTTP/1.1 " &&
        data.find("\r\nConnection: close\r\n") != std::string_view::npos) {
      said_close_ = true;
    }
    if (!Poll(POLLOUT, limits_.write_timeout_s * 1000)) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Describe(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Describe(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  static constexpr size_t kChunkBytes = 4096;

  size_t buffered() const { return buffer_.size() - begin_; }
  std::string_view Buffered() const { return std::string_view(buffer_).substr(begin_); }

  ssize_t Receive(char* ptr, size_t size) {
    ssize_t n;
    do {
      n = ::recv(fd_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  // Waits in short slices, so that a stopping server is not held up by a slow client.
  bool Poll(short events, int timeout_ms) const {
    constexpr int kSliceMs = 200;
    for (int waited = 0; waited < timeout_ms; waited += kSliceMs) {
      if (listening_ == INVALID_SOCKET) return false;
      pollfd p{fd_, events, 0};
      int rc = ::poll(&p, 1, std::min(kSliceMs, timeout_ms - waited));
      if (rc > 0) return true;
      if (rc < 0 && errno != EINTR) return false;
    }
    return false;
  }

  template <typename Getter>
  void Describe(Getter getter, std::string& ip, int& port) const {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getter(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return;
    if (auto e = ToEndpoint(ss)) {
      ip = AddressText(*e);
      port = e->port;
    }
  }

  int fd_;
  const ConnectionLimits& limits_;
  const std::atomic<socket_t>& listening_;
  std::string buffer_;  // what was received and not yet read: a head at most, or a chunk
  size_t begin_ = 0;
  bool said_close_ = false;
  bool head_timed_out_ = false;
};

// After a response that closes the connection while the client may still be sending (a refusal
// answered before its body was read): stop writing, read and drop what is in flight (up to
// kLingerBytes, for at most kLingerSeconds), then close. Closing at once would make the kernel
// reset the connection, and the client would lose the answer with it.
constexpr size_t kLingerBytes = 64 << 20;
constexpr int kLingerSeconds = 5;

void LingeringClose(int sock) {
  ::shutdown(sock, SHUT_WR);
  char buffer[64 * 1024];
  size_t drained = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kLingerSeconds);
  while (drained < kLingerBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{sock, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    ssize_t n = ::recv(sock, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

}  // namespace

std::string ClientKeyOf(int socket_fd) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (::getpeername(socket_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
      ::getsockname(socket_fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    return "unknown";
  }
  auto p = ToEndpoint(peer);
  auto l = ToEndpoint(local);
  if (!p || !l) return "unknown";
  if (IsLoopback(*p) && p->family == l->family) {
    if (auto uid = LoopbackPeerUid(*p, *l)) return fmt::format("uid:{}", *uid);
  }
  return "ip:" + AddressText(*p);
}

std::string OwnerClientKey() { return fmt::format("uid:{}", ::geteuid()); }

std::string ConnectionLimiter::TryAcquire(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool other = client != owner_;
  const int others_limit = limits_.max_connections - limits_.owner_reserve;
  if (held_by_all_ >= limits_.max_connections) {
    return fmt::format("the server holds {} connections, its limit; retry later",
                       limits_.max_connections);
  }
  if (other && held_by_others_ >= others_limit) {
    return fmt::format(
        "the server holds {} connections of other clients, their limit ({} of its {} are kept "
        "for its owner); retry later",
        others_limit, limits_.owner_reserve, limits_.max_connections);
  }
  int& held = held_[client];
  if (other && held >= limits_.per_client) {
    return fmt::format(
        "too many connections from this client: at most {} at once; close idle ones and retry",
        limits_.per_client);
  }
  ++held;
  ++held_by_all_;
  if (other) ++held_by_others_;
  return "";
}

void ConnectionLimiter::Release(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(client);
  if (it == held_.end()) return;
  --held_by_all_;
  if (client != owner_) --held_by_others_;
  if (--it->second <= 0) held_.erase(it);
}

int ConnectionLimiter::Held(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(client);
  return it == held_.end() ? 0 : it->second;
}

LimitedServer::LimitedServer(const ConnectionLimits& limits)
    : limits_(limits), limiter_(limits, OwnerClientKey()) {
  set_read_timeout(limits.read_timeout_s);
  set_write_timeout(limits.write_timeout_s);
  set_keep_alive_timeout(limits.keep_alive_timeout_s);
}

bool LimitedServer::ListenAfterBind() {
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
  return listen_after_bind();
}

bool LimitedServer::process_and_close_socket(socket_t sock) {
  const std::string client = ClientKeyOf(sock);
  if (const std::string refusal = limiter_.TryAcquire(client); !refusal.empty()) {
    const std::string body =
        nlohmann::json{{"error_code", "RESOURCE_EXHAUSTED"}, {"message", refusal}}.dump();
    const std::string busy = fmt::format(
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
        body.size(), body);
    (void)!::send(sock, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return true;
  }
  SocketStream stream(sock, limits_, svr_sock_);
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    // A fresh or idle connection that sends nothing is dropped after the keep-alive timeout.
    if (!stream.WaitReadable(limits_.keep_alive_timeout_s)) break;
    // The whole head first, within its limits; httplib then parses it from memory.
    const HeadScanner::State head = stream.ReadHead(limits_.head);
    if (head != HeadScanner::State::kComplete) {
      // Both say "Connection: close": the connection lingers below, then closes.
      if (head == HeadScanner::State::kTooLarge) {
        stream.WriteAll(HeadTooLargeResponse(limits_.head));
      } else if (stream.head_timed_out()) {
        stream.WriteAll(HeadTimeoutResponse(limits_.head));
      }
      break;
    }
    bool connection_closed = false;
    stream.StartRequest();
    ok = process_request(stream, left == 1, connection_closed, nullptr);
    if (!ok || connection_closed || stream.said_close()) break;
  }
  if (stream.said_close()) LingeringClose(sock);
  limiter_.Release(client);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace air::server
