// Finding and bounding a request head (see request_head.h).
#include "server/request_head.h"

#include <fmt/format.h>

namespace air::server {

HeadScanner::State HeadScanner::Feed(std::string_view data) {
  for (char c : data) {
    if (state_ != State::kIncomplete) break;
    ++bytes_;
    ++line_bytes_;
    if (c == '\n') {
      if (lines_ended_ > 0 && line_bytes_ == 2 && previous_ == '\r') {
        state_ = State::kComplete;  // within max_bytes: checked at every byte before
        break;
      }
      ++lines_ended_;
      line_bytes_ = 0;
      // Every line after the request line is a header line (httplib skips malformed ones).
      if (lines_ended_ - 1 > limits_.max_lines) state_ = State::kTooLarge;
    }
    previous_ = c;
    // A head that has not ended within max_bytes is over it (its blank line would be too).
    if (state_ == State::kIncomplete && bytes_ >= limits_.max_bytes) state_ = State::kTooLarge;
  }
  return state_;
}

namespace {

std::string RefusalResponse(std::string_view status_line, std::string_view message) {
  const std::string body =
      fmt::format(R"({{"error_code": "BAD_REQUEST", "message": "{}"}})", message);
  return fmt::format(
      "HTTP/1.1 {}\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Content-Length: {}\r\n\r\n{}",
      status_line, body.size(), body);
}

}  // namespace

std::string HeadTooLargeResponse(const HeadLimits& limits) {
  return RefusalResponse(
      "431 Request Header Fields Too Large",
      fmt::format("request head over {} KiB or {} header lines: air server reads no more "
                  "before authentication",
                  limits.max_bytes >> 10, limits.max_lines));
}

std::string HeadTimeoutResponse(const HeadLimits& limits) {
  return RefusalResponse(
      "408 Request Timeout",
      fmt::format("request head not complete within {} s of its first byte", limits.deadline_s));
}

}  // namespace air::server
