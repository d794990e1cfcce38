#include "train/events.h"

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
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  fields["time"] = now;
  fields["event"] = event;
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return;
  Status st = out_.Write(fields);
  if (!st.ok()) LOG_WARN("event log: {}", st.message());
}

}  // namespace elastrain
