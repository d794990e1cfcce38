#include "common/http_status.h"

#include <fmt/format.h>

namespace elastrain {

int HttpStatusFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk: return kHttpOk;
    case StatusCode::kInvalidArgument: return kHttpBadRequest;
    case StatusCode::kNotFound: return kHttpNotFound;
    case StatusCode::kFailedPrecondition: return kHttpConflict;
    case StatusCode::kPermissionDenied: return kHttpForbidden;
    default: return kHttpInternalError;
  }
}

Status StatusFromHttp(int http_status, const std::string& message) {
  if (http_status >= 200 && http_status < 300) return Status::OK();
  switch (http_status) {
    case kHttpBadRequest:
    case kHttpUnauthorized: return Status::InvalidArgument(message);
    case kHttpForbidden: return Status::PermissionDenied(message);
    case kHttpNotFound: return Status::NotFound(message);
    case kHttpConflict: return Status::FailedPrecondition(message);
    default: return Status::Internal(fmt::format("HTTP {}: {}", http_status, message));
  }
}

}  // namespace elastrain
