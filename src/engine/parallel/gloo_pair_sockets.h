// GlooPairSockets: the TCP socket under each of a Gloo context's pairs, and which of them broke —
// how a failed collective tells which peer it lost.
//
// Gloo's error text names an address ("Read error [127.0.0.1]:4002: ..."), but not always one of
// the pair's two ends (seen on a loaded machine: the ends recorded at connect time and the one
// the error printed differ), so the address alone misattributes or names nobody. The sockets
// themselves are the direct evidence: Gloo closes a pair's socket when the pair fails, and a
// peer that exited or was killed leaves this side's socket half-closed (CLOSE_WAIT) or reset
// (CLOSE). Addresses are strings as Gloo prints them (gloo::transport::tcp::Address::str(): the
// Debian 2022 Gloo prints the port in network byte order), so they compare with Gloo's errors.
// Thread safety: const methods may run concurrently; Find/Add before sharing.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace air::engine::parallel {

// A connected socket's two ends, as Gloo prints addresses.
struct SocketEnds {
  std::string local;
  std::string peer;
  bool operator==(const SocketEnds&) const = default;
};

// nullopt when `fd` is not an open, connected IPv4/IPv6 socket.
std::optional<SocketEnds> EndsOf(int fd);

class GlooPairSockets {
 public:
  // Finds, among this process's descriptors, the connected socket whose local end is each
  // rank's pair address (Gloo's Pair::address() once connected). A rank whose socket is not
  // found (a Gloo whose pair addresses are not socket ends) is left out: it is never named.
  static GlooPairSockets Find(const std::map<int, std::string>& pair_address_by_rank);

  // Records `fd` (connected now) as the socket to `rank`.
  void Add(int rank, int fd);

  // The ranks whose socket is gone (closed, its descriptor reused) or whose peer closed or
  // reset it, in rank order.
  std::vector<int> Broken() const;

  // The rank one of whose socket's ends `text` names as a whole address ("...]:4002" does not
  // name "...]:400"), else -1.
  int NamedIn(const std::string& text) const;

  // The lost rank a failure shows: the one `error` names, else the only broken socket's, else -1.
  int LostRank(const std::string& error) const;

  size_t size() const { return by_rank_.size(); }

 private:
  struct Entry {
    int fd = -1;
    SocketEnds ends;
  };
  std::map<int, Entry> by_rank_;
};

}  // namespace air::engine::parallel
