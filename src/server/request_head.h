// The request head (request line, header lines, the blank line) that `air server` reads before
// it knows who is asking, bounded in bytes, in lines and in time.
//
// cpp-httplib 0.11.4 as Debian builds it (a compiled libcpp-httplib.so, so its CPPHTTPLIB_*
// macros are fixed) reads any number of header lines and grows one line without bound until it
// ends; its only timeout is per read. So the server's connection loop (server/connections.h)
// first reads the whole head into its own buffer with these limits, and only then hands the
// request to httplib, which then parses bytes already in memory:
//   - at most `max_bytes` (64 KiB) and `max_lines` (100) header lines, else 431 and close;
//   - the blank line within `deadline_s` (10 s) of the head's first byte, else 408 and close
//     (a client sending one byte every few seconds no longer holds a thread indefinitely).
// Both refusals name the limit. Kept over a newer HTTP library: Debian 12 has only this
// cpp-httplib, and reading the head before httplib does bounds its parser whatever its version.
// HeadScanner finds the end of a head as httplib does: lines end at
// "\n", and the head ends at the first line after the request line that is exactly "\r\n".
// Thread safety: a HeadScanner belongs to one connection; the rest are pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace air::server {

struct HeadLimits {
  size_t max_bytes = 64 << 10;  // the whole head, request line included
  size_t max_lines = 100;       // header lines, the request line not counted
  int deadline_s = 10;          // from the head's first byte to its blank line
};

// Scans a head fed to it in pieces, each byte once.
class HeadScanner {
 public:
  enum class State { kIncomplete, kComplete, kTooLarge };

  explicit HeadScanner(const HeadLimits& limits) : limits_(limits) {}

  // Scans `data` (what arrived since the last call). Stops at the head's end: bytes past it are
  // the body or the next request, never scanned.
  State Feed(std::string_view data);
  State state() const { return state_; }
  size_t bytes() const { return bytes_; }  // scanned so far; the head's size once complete

 private:
  const HeadLimits limits_;
  State state_ = State::kIncomplete;
  size_t bytes_ = 0;
  size_t lines_ended_ = 0;  // the request line is the first
  size_t line_bytes_ = 0;   // of the line being read
  char previous_ = 0;
};

// The raw responses (status line to body) of the two refusals; both close the connection.
std::string HeadTooLargeResponse(const HeadLimits& limits);
std::string HeadTimeoutResponse(const HeadLimits& limits);

}  // namespace air::server
