// GlooPairSockets over real loopback TCP connections: a pair's socket found by its local end as
// Gloo prints it, a peer that closes or resets its end (a killed rank) and a socket this side
// closed (Gloo's own close of a failed pair) reported broken, and an error's address matched
// only as a whole address.
#include "engine/parallel/gloo_pair_sockets.h"

#include <gloo/transport/tcp/address.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace air::engine::parallel {
namespace {

// A loopback TCP connection: `near` is this side's socket, `far` the peer's.
struct Connection {
  int near = -1;
  int far = -1;
};

Connection Connect() {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  Connection c;
  c.near = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(::connect(c.near, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  c.far = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  return c;
}

// Ranks 1 and 2's pairs, each over its own connection.
struct TwoPairs {
  Connection to1 = Connect(), to2 = Connect();
  GlooPairSockets sockets;
  TwoPairs() {
    sockets.Add(1, to1.near);
    sockets.Add(2, to2.near);
  }
};

std::string GlooLocal(int fd) { return gloo::transport::tcp::Address::fromSockName(fd).str(); }
std::string GlooPeer(int fd) { return gloo::transport::tcp::Address::fromPeerName(fd).str(); }

// The broken ranks once `count` are (a loopback FIN or RST arrives within microseconds; the
// wait is bounded for a loaded machine), else the last answer.
std::vector<int> BrokenSoon(const GlooPairSockets& sockets, size_t count = 1) {
  std::vector<int> broken;
  for (int i = 0; i < 500 && broken.size() < count; ++i) {
    broken = sockets.Broken();
    if (broken.size() < count) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return broken;
}

TEST(GlooPairSockets, EndsAreGloosAddresses) {
  Connection c = Connect();
  std::optional<SocketEnds> ends = EndsOf(c.near);
  ASSERT_TRUE(ends);
  EXPECT_EQ(ends->local, GlooLocal(c.near));
  EXPECT_EQ(ends->peer, GlooPeer(c.near));
  EXPECT_EQ(ends->peer, GlooLocal(c.far));
  EXPECT_FALSE(EndsOf(-1));
  ::close(c.near);
  ::close(c.far);
}

TEST(GlooPairSockets, FindsEachPairsSocketByItsLocalEnd) {
  Connection to1 = Connect(), to2 = Connect();
  GlooPairSockets sockets = GlooPairSockets::Find({{1, GlooLocal(to1.near)},
                                                   {2, GlooLocal(to2.near)},
                                                   {3, "[127.0.0.1]:1"}});  // no such socket
  EXPECT_EQ(sockets.size(), 2u);
  EXPECT_TRUE(sockets.Broken().empty());
  EXPECT_EQ(sockets.NamedIn("Read error " + GlooPeer(to2.near) + ": Connection reset by peer"), 2);
  EXPECT_EQ(sockets.NamedIn("Connection closed by peer " + GlooPeer(to1.near)), 1);
  EXPECT_EQ(sockets.NamedIn("Timed out waiting 30000ms for send operation to complete"), -1);
  for (int fd : {to1.near, to1.far, to2.near, to2.far}) ::close(fd);
}

TEST(GlooPairSockets, AnAddressIsMatchedWhole) {
  Connection c = Connect();
  GlooPairSockets sockets;
  sockets.Add(1, c.near);
  const std::string peer = GlooPeer(c.near);
  EXPECT_EQ(sockets.NamedIn("closed by peer " + peer), 1);
  EXPECT_EQ(sockets.NamedIn("closed by peer " + peer + ": reset"), 1);
  EXPECT_EQ(sockets.NamedIn("closed by peer " + peer + "7"), -1);  // another port
  ::close(c.near);
  ::close(c.far);
}

TEST(GlooPairSockets, APeerThatExitsBreaksOnlyItsSocket) {
  TwoPairs pairs;
  ::close(pairs.to1.far);  // rank 1's process is gone: its kernel closes its end
  EXPECT_EQ(BrokenSoon(pairs.sockets), std::vector<int>{1});
  EXPECT_EQ(pairs.sockets.LostRank("Timed out waiting 30000ms for recv operation to complete"), 1);
  EXPECT_EQ(pairs.sockets.LostRank("Read error [10.255.255.1]:4002: Connection reset by peer"), 1);
  for (int fd : {pairs.to1.near, pairs.to2.near, pairs.to2.far}) ::close(fd);
}

TEST(GlooPairSockets, AResetPeerBreaksItsSocket) {
  Connection c = Connect();
  GlooPairSockets sockets;
  sockets.Add(1, c.near);
  linger hard{1, 0};  // close with RST, as a killed process's unread data makes the kernel do
  ASSERT_EQ(::setsockopt(c.far, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard)), 0);
  ::close(c.far);
  EXPECT_EQ(BrokenSoon(sockets), std::vector<int>{1});
  ::close(c.near);
}

TEST(GlooPairSockets, ASocketGlooClosedOrReusedIsBroken) {
  TwoPairs pairs;
  GlooPairSockets& sockets = pairs.sockets;
  ::close(pairs.to1.near);  // Gloo closes a failed pair's socket
  EXPECT_EQ(sockets.Broken(), std::vector<int>{1});
  Connection reused = Connect();  // the lowest free descriptor: likely the closed one again
  EXPECT_EQ(sockets.Broken(), std::vector<int>{1});
  // Two broken sockets and an error naming neither: no single rank is shown.
  ::close(pairs.to2.far);
  EXPECT_EQ(BrokenSoon(sockets, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(sockets.LostRank("Timed out"), -1);
  for (int f : {pairs.to1.far, pairs.to2.near, reused.near, reused.far}) ::close(f);
}

}  // namespace
}  // namespace air::engine::parallel
