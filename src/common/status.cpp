#include "common/status.h"

namespace elastrain {

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code_) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: name = "InvalidArgument"; break;
    case StatusCode::kNotFound: name = "NotFound"; break;
    case StatusCode::kCorruption: name = "Corruption"; break;
    case StatusCode::kIOError: name = "IOError"; break;
    case StatusCode::kOutOfMemory: name = "OutOfMemory"; break;
    case StatusCode::kFailedPrecondition: name = "FailedPrecondition"; break;
    case StatusCode::kInternal: name = "Internal"; break;
    case StatusCode::kDeadlineExceeded: name = "DeadlineExceeded"; break;
    case StatusCode::kUnavailable: name = "Unavailable"; break;
    case StatusCode::kPermissionDenied: name = "PermissionDenied"; break;
    case StatusCode::kCancelled: name = "Cancelled"; break;
  }
  return std::string(name) + ": " + message_;
}

}  // namespace elastrain
