// Status helpers: code names, context prefixes, errno mapping.
#include "base/status.h"

#include <cerrno>
#include <cstring>

namespace air {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kFailedPrecondition:
      return "failed_precondition";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kDataLoss:
      return "data_loss";
    case ErrorCode::kResourceExhausted:
      return "resource_exhausted";
    case ErrorCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kUnimplemented:
      return "unimplemented";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status ErrnoStatus(const std::string& what, int err) {
  ErrorCode code = ErrorCode::kInternal;
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      code = ErrorCode::kNotFound;
      break;
    case EEXIST:
      code = ErrorCode::kAlreadyExists;
      break;
    case EACCES:
    case EPERM:
    case EROFS:
      code = ErrorCode::kPermissionDenied;
      break;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      code = ErrorCode::kResourceExhausted;
      break;
    case EINVAL:
      code = ErrorCode::kInvalidArgument;
      break;
    case ETIMEDOUT:
      code = ErrorCode::kDeadlineExceeded;
      break;
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
      code = ErrorCode::kUnavailable;
      break;
    default:
      break;
  }
  return Status(code, what + ": " + std::strerror(err));
}

}  // namespace air
