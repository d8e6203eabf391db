// Status and Result<T>: errors as values for all host code (leveldb Status, abseil StatusOr).
//
// A Status is either OK or carries an ErrorCode and a human message. A user-facing message
// names the file, the field or line, and what would be valid. Result<T> holds a T or a
// non-OK Status. Both are cheap to move and [[nodiscard]]. Only main() decides to exit.
// Thread safety: values; no shared state.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace air {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: spec, flags, config, data
  kNotFound,         // a file, run, secret, tensor that does not exist
  kAlreadyExists,
  kFailedPrecondition,
  kPermissionDenied,
  kDataLoss,           // corrupt or truncated file
  kResourceExhausted,  // disk full, out of memory
  kDeadlineExceeded,
  kCancelled,
  kUnavailable,  // a peer or service cannot be reached
  kInternal,     // a broken invariant or an unexpected OS failure
  kUnimplemented,
};

// Stable lowercase name used in JSON envelopes ("invalid_argument", ...).
const char* ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: message" (or "ok").
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {ErrorCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {ErrorCode::kFailedPrecondition, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {ErrorCode::kPermissionDenied, std::move(m)};
}
inline Status DataLoss(std::string m) { return {ErrorCode::kDataLoss, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {ErrorCode::kResourceExhausted, std::move(m)};
}
inline Status DeadlineExceeded(std::string m) {
  return {ErrorCode::kDeadlineExceeded, std::move(m)};
}
inline Status Cancelled(std::string m) { return {ErrorCode::kCancelled, std::move(m)}; }
inline Status Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {ErrorCode::kUnimplemented, std::move(m)}; }

// Status from errno: "<what>: <strerror(err)>", code chosen from errno (ENOENT -> kNotFound,
// ENOSPC -> kResourceExhausted, EACCES -> kPermissionDenied, ...).
Status ErrnoStatus(const std::string& what, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace air

#define AIR_CONCAT_INNER_(a, b) a##b
#define AIR_CONCAT_(a, b) AIR_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define AIR_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::air::Status air_status_ = (expr);        \
    if (!air_status_.ok()) return air_status_; \
  } while (0)

// `AIR_ASSIGN_OR_RETURN(auto x, ComputeX());` declares x from a Result or returns its error.
#define AIR_ASSIGN_OR_RETURN(lhs, expr) \
  AIR_ASSIGN_OR_RETURN_IMPL_(AIR_CONCAT_(air_result_, __LINE__), lhs, expr)
#define AIR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
