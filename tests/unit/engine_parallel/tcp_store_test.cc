// TcpStoreServer and TcpStoreClient over real sockets: set/get/add/compare-set/wait, a wait that
// ends by its deadline, a port in use, an unreachable store, a lost server and a foreign listener.
#include "engine/parallel/tcp_store.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace air::engine::parallel {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

std::unique_ptr<TcpStoreClient> ConnectTo(int port) {
  auto c = TcpStoreClient::Connect("127.0.0.1", port, milliseconds(5000), milliseconds(5000));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(TcpStore, SetGetAddCompareSet) {
  auto server = TcpStoreServer::Start(0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto a = ConnectTo((*server)->port());
  auto b = ConnectTo((*server)->port());
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Set("k", std::string("v\0w", 3)).ok());
  auto got = b->Get("k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, std::string("v\0w", 3));
  auto missing = b->TryGet("nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  EXPECT_EQ(*a->Add("n", 2), 2);
  EXPECT_EQ(*b->Add("n", 3), 5);
  EXPECT_EQ(*b->Get("n"), "5");
  // First writer wins: the second compare-set sees the first's value.
  EXPECT_EQ(*a->CompareSet("first", "", "a"), "a");
  EXPECT_EQ(*b->CompareSet("first", "", "b"), "a");
  EXPECT_EQ(*b->CompareSet("first", "a", "b"), "b");
  EXPECT_TRUE(*a->Check({"k", "n"}));
  EXPECT_FALSE(*a->Check({"k", "nope"}));
}

TEST(TcpStore, WaitSeesALaterSetAndEndsByItsDeadline) {
  auto server = TcpStoreServer::Start(0);
  ASSERT_TRUE(server.ok());
  auto a = ConnectTo((*server)->port());
  auto b = ConnectTo((*server)->port());
  std::thread setter([&] { EXPECT_TRUE(b->Set("later", "x").ok()); });
  EXPECT_TRUE(a->Wait({"later"}, milliseconds(10000)).ok());
  setter.join();
  Status never = a->Wait({"never"}, milliseconds(200));
  EXPECT_EQ(never.code(), ErrorCode::kDeadlineExceeded) << never.ToString();
}

TEST(TcpStore, PortInUseIsAClearError) {
  auto first = TcpStoreServer::Start(0);
  ASSERT_TRUE(first.ok());
  auto second = TcpStoreServer::Start((*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(),
              HasSubstr(fmt::format("port {} is in use", (*first)->port())));
}

TEST(TcpStore, UnreachableAndLostServers) {
  int port = 0;
  {
    auto server = TcpStoreServer::Start(0);
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
    auto client = ConnectTo(port);
    ASSERT_TRUE(client);
    server->reset();  // the server goes away under a connected client
    auto after = client->Check({"k"});
    ASSERT_FALSE(after.ok());
    EXPECT_THAT(after.status().message(), HasSubstr("lost the rendezvous store at 127.0.0.1:"));
  }
  auto none = TcpStoreClient::Connect("127.0.0.1", port, milliseconds(300), milliseconds(300));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(),
              HasSubstr(fmt::format("could not reach the rendezvous store at 127.0.0.1:{}", port)));
}

// Another program on MASTER_PORT (one that accepts and hangs up, as a stray listener does) is
// named as such, not reported as a store that was lost.
TEST(TcpStore, AForeignListenerIsNotMistakenForTheStore) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  std::thread hang_up([fd] {
    int c = ::accept(fd, nullptr, nullptr);
    if (c >= 0) ::close(c);
  });
  auto client = TcpStoreClient::Connect("127.0.0.1", port, milliseconds(2000), milliseconds(2000));
  hang_up.join();
  ::close(fd);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(),
              HasSubstr(fmt::format("127.0.0.1:{} accepted the connection but did not answer as a "
                                    "rendezvous store",
                                    port)));
  EXPECT_THAT(client.status().message(), HasSubstr("another program"));
}

}  // namespace
}  // namespace air::engine::parallel
