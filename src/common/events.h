// The run's event log, <run>/events.jsonl: one JSON object per line with the wall time
// (`time`, seconds since the epoch), the event name (`event`) and its fields. Written by
// the chief rank; every line is flushed as written. Thread-safe.
#pragma once

#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/metrics.h"

namespace elastrain {

class EventLog {
 public:
  // Appends to `path` (created if missing). An empty path makes a log that drops events.
  Status Open(const std::string& path);
  // Logs `fields` + {"time", "event"}; failures to write are logged, not returned.
  void Emit(const std::string& event, nlohmann::json fields = nlohmann::json::object());
  // MetricsWriter::set_fence, for the events of a worker of a generation that may be stale.
  void set_fence(std::function<Status()> fence);

 private:
  std::mutex mu_;
  bool open_ = false;
  MetricsWriter out_;  // GUARDED_BY(mu_)
};

}  // namespace elastrain
