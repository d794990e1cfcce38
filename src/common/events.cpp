#include "common/events.h"

#include "common/clock.h"

#include <chrono>

#include "common/log.h"

namespace elastrain {

Status EventLog::Open(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (path.empty()) return Status::OK();
  ELASTRAIN_RETURN_IF_ERROR(out_.Open(path, /*append=*/true));
  open_ = true;
  return Status::OK();
}

void EventLog::Emit(const std::string& event, nlohmann::json fields) {
  fields["time"] = WallSeconds();
  fields["event"] = event;
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return;
  Status st = out_.Write(fields);
  if (!st.ok()) LOG_WARN("event log: {}", st.message());
}

void EventLog::set_fence(std::function<Status()> fence) {
  std::lock_guard<std::mutex> lock(mu_);
  out_.set_fence(std::move(fence));
}

}  // namespace elastrain
