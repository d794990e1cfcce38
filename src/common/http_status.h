// The one map between a Status and an HTTP status code, used by both ends of the job
// API: the server (monitor/job_api.cpp) answers a failed request with
// HttpStatusFor(st) and {"error": message}; the client (cli/cmd_cluster.cpp) turns that
// answer back into StatusFromHttp(code, message), so a bad request stays
// InvalidArgument (exit code 2) across the wire and a refused one FailedPrecondition.
//
//   Status                 HTTP
//   kInvalidArgument  <->  400 Bad Request
//   kNotFound         <->  404 Not Found
//   kFailedPrecondition <-> 409 Conflict
//   kInvalidArgument  <--  401 Unauthorized (a missing or wrong token is bad input)
//   anything else      ->  500; any other code <- kInternal "HTTP <code>: <message>"
#pragma once

#include <string>

#include "common/status.h"

namespace elastrain {

inline constexpr int kHttpContinue = 100;
inline constexpr int kHttpOk = 200;
inline constexpr int kHttpBadRequest = 400;
inline constexpr int kHttpUnauthorized = 401;
inline constexpr int kHttpForbidden = 403;
inline constexpr int kHttpNotFound = 404;
inline constexpr int kHttpConflict = 409;
inline constexpr int kHttpLengthRequired = 411;
inline constexpr int kHttpPayloadTooLarge = 413;
inline constexpr int kHttpUnsupportedMediaType = 415;
inline constexpr int kHttpMisdirected = 421;
inline constexpr int kHttpInternalError = 500;

// The code a server answers a non-ok `st` with (kHttpOk for an ok one).
int HttpStatusFor(const Status& st);
// The Status a client makes of an answer with `http_status` and the server's `message`
// (ok for 2xx).
Status StatusFromHttp(int http_status, const std::string& message);

}  // namespace elastrain
