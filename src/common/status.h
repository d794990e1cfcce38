// Status and Result<T>: how errors cross module boundaries (LevelDB style).
// A Status is cheap to copy; an ok Status carries no message. Library code returns
// these instead of throwing or exiting; only main() turns them into exit codes.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace elastrain {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // bad user input: config, flags, arguments
  kNotFound,          // a file, key or checkpoint that does not exist
  kCorruption,        // data that fails a check (checksum, magic, shape)
  kIOError,           // the OS refused a read or write
  kOutOfMemory,       // a configuration that cannot fit in memory
  kFailedPrecondition,
  kInternal,
  kDeadlineExceeded,  // a blocking call ran past its timeout (e.g. a stalled peer)
  kUnavailable,       // a peer or service went away (e.g. a connection reset)
  kPermissionDenied,  // refused for safety: a link, a file of another user, a bad mode
  kCancelled,         // the caller's own side stopped the operation (an abort, a stop, a
                      // generation that ended while waiting): not a fault of the operation
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
  static Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
  static Status Corruption(std::string m) { return Status(StatusCode::kCorruption, std::move(m)); }
  static Status IOError(std::string m) { return Status(StatusCode::kIOError, std::move(m)); }
  static Status OutOfMemory(std::string m) { return Status(StatusCode::kOutOfMemory, std::move(m)); }
  static Status FailedPrecondition(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
  static Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
  static Status DeadlineExceeded(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }
  static Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
  static Status PermissionDenied(std::string m) { return Status(StatusCode::kPermissionDenied, std::move(m)); }
  static Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  bool cancelled() const { return code_ == StatusCode::kCancelled; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: steps=-3: expected a positive integer"
  std::string ToString() const;

 private:
  Status(StatusCode c, std::string m) : code_(c), message_(std::move(m)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}   // NOLINT: must be non-ok
  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace elastrain

// Returns early from the enclosing function when `expr` yields a non-ok Status.
#define ELASTRAIN_RETURN_IF_ERROR(expr)        \
  do {                                         \
    ::elastrain::Status _st = (expr);          \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define ELASTRAIN_CONCAT_INNER(a, b) a##b
#define ELASTRAIN_CONCAT(a, b) ELASTRAIN_CONCAT_INNER(a, b)
// ELASTRAIN_ASSIGN_OR_RETURN(auto x, MakeX()); declares x or returns the error.
#define ELASTRAIN_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto ELASTRAIN_CONCAT(_res_, __LINE__) = (expr);                             \
  if (!ELASTRAIN_CONCAT(_res_, __LINE__).ok())                                 \
    return ELASTRAIN_CONCAT(_res_, __LINE__).status();                         \
  lhs = std::move(ELASTRAIN_CONCAT(_res_, __LINE__)).value()
