// GlooPairSockets: each Gloo pair's socket found by its local end, and broken sockets told by
// their descriptor and TCP state.
#include "engine/parallel/gloo_pair_sockets.h"

#include <gloo/transport/tcp/address.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cctype>
#include <cstdlib>

#include "base/env.h"

namespace air::engine::parallel {
namespace {

std::string GlooAddress(const sockaddr_storage& ss, socklen_t len) {
  return gloo::transport::tcp::Address(reinterpret_cast<const sockaddr*>(&ss), len).str();
}

// Whether the peer has closed (FIN: CLOSE_WAIT, LAST_ACK) or reset (CLOSE) the connection.
bool PeerClosed(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  return info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_LAST_ACK ||
         info.tcpi_state == TCP_CLOSE;
}

// Where `address` occurs in `text` as a whole address: not followed by another digit.
bool NamesWhole(const std::string& text, const std::string& address) {
  if (address.empty()) return false;
  for (size_t at = text.find(address); at != std::string::npos; at = text.find(address, at + 1)) {
    const size_t end = at + address.size();
    if (end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

}  // namespace

std::optional<SocketEnds> EndsOf(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return std::nullopt;
  if (local.ss_family != AF_INET && local.ss_family != AF_INET6) return std::nullopt;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return std::nullopt;
  return SocketEnds{GlooAddress(local, local_len), GlooAddress(peer, peer_len)};
}

GlooPairSockets GlooPairSockets::Find(const std::map<int, std::string>& pair_address_by_rank) {
  std::map<std::string, int> rank_of;
  for (const auto& [rank, address] : pair_address_by_rank) rank_of[address] = rank;
  GlooPairSockets found;
  // The open descriptors only (a scan up to the descriptor limit costs two system calls for
  // each possible number); unreadable /proc: no socket found, so no rank is ever named.
  Result<std::vector<std::string>> open = DefaultEnv()->ListDir("/proc/self/fd");
  if (!open.ok()) return found;
  for (const std::string& name : *open) {
    if (found.by_rank_.size() == rank_of.size()) break;
    const int fd = std::atoi(name.c_str());
    std::optional<SocketEnds> ends = EndsOf(fd);
    if (!ends) continue;
    auto it = rank_of.find(ends->local);
    if (it == rank_of.end() || found.by_rank_.count(it->second)) continue;
    found.by_rank_[it->second] = Entry{fd, *ends};
  }
  return found;
}

void GlooPairSockets::Add(int rank, int fd) {
  if (std::optional<SocketEnds> ends = EndsOf(fd)) by_rank_[rank] = Entry{fd, *ends};
}

std::vector<int> GlooPairSockets::Broken() const {
  std::vector<int> broken;
  for (const auto& [rank, entry] : by_rank_) {
    std::optional<SocketEnds> now = EndsOf(entry.fd);
    if (!now || *now != entry.ends || PeerClosed(entry.fd)) broken.push_back(rank);
  }
  return broken;
}

int GlooPairSockets::NamedIn(const std::string& text) const {
  for (const auto& [rank, entry] : by_rank_) {
    if (NamesWhole(text, entry.ends.peer) || NamesWhole(text, entry.ends.local)) return rank;
  }
  return -1;
}

int GlooPairSockets::LostRank(const std::string& error) const {
  if (int named = NamedIn(error); named >= 0) return named;
  std::vector<int> broken = Broken();
  return broken.size() == 1 ? broken.front() : -1;
}

}  // namespace air::engine::parallel
