// Tests for what the server reads and holds before authentication: finding a request head's end
// as httplib does and its limits (server/request_head.h), and the connection caps per client, for
// other clients together and in all (server/connections.h). tests/python/test_server_security.py
// checks the same against a running server: the header flood, other users' slow headers, a head
// that never ends.
#include "server/connections.h"

#include <gtest/gtest.h>

#include <string>

#include "server/request_head.h"

namespace air::server {
namespace {

using State = HeadScanner::State;

TEST(HeadScannerTest, EndsAtTheFirstBlankLineAfterTheRequestLine) {
  HeadScanner scanner(HeadLimits{});
  const std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b\r\n\r\n";
  EXPECT_EQ(scanner.Feed(head + "body bytes, never scanned"), State::kComplete);
  EXPECT_EQ(scanner.bytes(), head.size());
}

TEST(HeadScannerTest, FindsTheEndAcrossPiecesOfOneByte) {
  HeadScanner scanner(HeadLimits{});
  const std::string head = "POST /x HTTP/1.1\r\nHost: h\r\n\r\n";
  for (size_t i = 0; i + 1 < head.size(); ++i) {
    ASSERT_EQ(scanner.Feed(head.substr(i, 1)), State::kIncomplete) << i;
  }
  EXPECT_EQ(scanner.Feed(head.substr(head.size() - 1)), State::kComplete);
  EXPECT_EQ(scanner.bytes(), head.size());
}

TEST(HeadScannerTest, ABareNewlineDoesNotEndTheHead) {
  // httplib skips lines that do not end in "\r\n"; only "\r\n" alone ends the head.
  HeadScanner scanner(HeadLimits{});
  EXPECT_EQ(scanner.Feed("GET / HTTP/1.1\r\n\nX: y\n\r\r\n"), State::kIncomplete);
  EXPECT_EQ(scanner.Feed("\r\n"), State::kComplete);
}

TEST(HeadScannerTest, TooManyHeaderLines) {
  HeadLimits limits;
  limits.max_lines = 3;
  const std::string request_line = "GET / HTTP/1.1\r\n";
  HeadScanner at_limit(limits);
  EXPECT_EQ(at_limit.Feed(request_line + "A: 1\r\nB: 2\r\nC: 3\r\n\r\n"), State::kComplete);
  HeadScanner over(limits);
  EXPECT_EQ(over.Feed(request_line + "A: 1\r\nB: 2\r\nC: 3\r\n"), State::kIncomplete);
  EXPECT_EQ(over.Feed("D: 4\r\n"), State::kTooLarge);
  EXPECT_EQ(over.Feed("\r\n"), State::kTooLarge);  // stays refused
}

TEST(HeadScannerTest, TooManyBytesWithOrWithoutLineEnds) {
  HeadLimits limits;
  limits.max_bytes = 64;
  const std::string head = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  HeadScanner exactly(limits);
  EXPECT_EQ(exactly.Feed(head + std::string(64 - head.size(), 'b')), State::kComplete);
  HeadScanner padded(limits);
  const std::string long_header = "X: " + std::string(64 - 16 - 3 - 4, 'a') + "\r\n";
  EXPECT_EQ(padded.Feed("GET / HTTP/1.1\r\n" + long_header), State::kIncomplete);
  EXPECT_EQ(padded.Feed("\r"), State::kIncomplete);  // 63 bytes
  EXPECT_EQ(padded.Feed("\n"), State::kComplete);    // 64: its blank line is the last byte
  HeadScanner endless(limits);                       // one line that never ends
  EXPECT_EQ(endless.Feed("GET /" + std::string(100, 'a')), State::kTooLarge);
  EXPECT_EQ(endless.bytes(), 64u);
}

TEST(HeadScannerTest, RefusalsNameTheLimit) {
  const std::string too_large = HeadTooLargeResponse(HeadLimits{});
  EXPECT_EQ(too_large.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0), 0u);
  EXPECT_NE(too_large.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(too_large.find("request head over 64 KiB or 100 header lines"), std::string::npos);
  const std::string timeout = HeadTimeoutResponse(HeadLimits{});
  EXPECT_EQ(timeout.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u);
  EXPECT_NE(timeout.find("within 10 s of its first byte"), std::string::npos);
  // Content-Length matches the body.
  const size_t body = timeout.find("\r\n\r\n") + 4;
  EXPECT_NE(timeout.find("Content-Length: " + std::to_string(timeout.size() - body)),
            std::string::npos);
}

ConnectionLimits SmallLimits() {
  ConnectionLimits limits;
  limits.max_connections = 6;
  limits.owner_reserve = 2;
  limits.per_client = 3;
  return limits;
}

TEST(ConnectionLimiterTest, OtherClientsCannotTakeTheOwnersReserve) {
  ConnectionLimiter limiter(SmallLimits(), "uid:1000");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.TryAcquire("uid:2001"), "");
  EXPECT_NE(limiter.TryAcquire("uid:2001").find("at most 3 at once"), std::string::npos);
  EXPECT_EQ(limiter.TryAcquire("uid:2002"), "");
  // Other clients hold 4 of 6: the last 2 are the owner's.
  const std::string full = limiter.TryAcquire("uid:2002");
  EXPECT_NE(full.find("4 connections of other clients"), std::string::npos) << full;
  EXPECT_NE(full.find("2 of its 6 are kept for its owner"), std::string::npos) << full;
  EXPECT_NE(limiter.TryAcquire("ip:10.0.0.7"), "");
  EXPECT_EQ(limiter.TryAcquire("uid:1000"), "");
  EXPECT_EQ(limiter.TryAcquire("uid:1000"), "");
  EXPECT_NE(limiter.TryAcquire("uid:1000").find("holds 6 connections, its limit"),
            std::string::npos);
  // A release makes room for whoever it left room for.
  limiter.Release("uid:2001");
  EXPECT_EQ(limiter.Held("uid:2001"), 2);
  EXPECT_EQ(limiter.TryAcquire("uid:2002"), "");
  EXPECT_NE(limiter.TryAcquire("uid:1000"), "");
}

TEST(ConnectionLimiterTest, TheOwnerMayUseWhatOthersDoNot) {
  ConnectionLimiter limiter(SmallLimits(), "uid:1000");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(limiter.TryAcquire("uid:1000"), "") << i;
  EXPECT_NE(limiter.TryAcquire("uid:2001"), "");
  for (int i = 0; i < 6; ++i) limiter.Release("uid:1000");
  EXPECT_EQ(limiter.Held("uid:1000"), 0);
  EXPECT_EQ(limiter.TryAcquire("uid:2001"), "");
}

}  // namespace
}  // namespace air::server
