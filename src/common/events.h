// The run's event log, <run>/events.jsonl: one JSON object per line with the wall time
// (`time`, seconds since the epoch), the event name (`event`) and its fields. Written by
// the controller, the chief rank and the launched worker; every line is flushed as
// written. Thread-safe.
//
// The events are the structs of wire/events.h (one per event, its name in `kName`, its
// JSON through ELASTRAIN_JSON_RECORD): `Emit(CheckpointSavedEvent{...})`. This module
// cannot see wire/, so Emit is a template that needs only T::kName and T's to_json.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "common/metrics.h"

namespace elastrain {

// The line of an event named `name` with `fields` (a JSON object, or null for none) at
// wall time `time`: the fields plus {"time", "event"}.
nlohmann::json EventLine(std::string_view name, nlohmann::json fields, double time);

class EventLog {
 public:
  // Appends to `path` (created if missing). An empty path makes a log that drops events.
  Status Open(const std::string& path);
  // Logs `event` (a struct of wire/events.h) at the wall time now; failures to write are
  // logged, not returned.
  template <typename T>
  void Emit(const T& event) {
    Append(EventLine(T::kName, nlohmann::json(event), WallSeconds()));
  }
  // MetricsWriter::set_fence, for the events of a worker of a generation that may be stale.
  void set_fence(std::function<Status()> fence);

 private:
  void Append(const nlohmann::json& line);

  std::mutex mu_;
  bool open_ = false;
  MetricsWriter out_;  // GUARDED_BY(mu_)
};

}  // namespace elastrain
