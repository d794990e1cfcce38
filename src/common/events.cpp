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

nlohmann::json EventLine(std::string_view name, nlohmann::json fields, double time) {
  if (!fields.is_object()) fields = nlohmann::json::object();  // null: a struct with no field written
  fields["time"] = time;
  fields["event"] = std::string(name);
  return fields;
}

void EventLog::Append(const nlohmann::json& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return;
  Status st = out_.Write(line);
  if (!st.ok()) LOG_WARN("event log: {}", st.message());
}

void EventLog::set_fence(std::function<Status()> fence) {
  std::lock_guard<std::mutex> lock(mu_);
  out_.set_fence(std::move(fence));
}

}  // namespace elastrain
