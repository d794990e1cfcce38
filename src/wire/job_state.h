// The job's lifecycle, owned by the controller (elastic/policy.h decides the transitions):
//
//   PENDING --------------------> RUNNING ----------------------> SUCCEEDED
//      |                          |    ^  +
//      v                          |    |   +--> RECOVERING --+  (a failure, counted)
//   WAITING_FOR_RESOURCES <-------+    |   +--> RESIZING ----+  (membership change or preemption)
//      |   (fewer than min_workers)    +--------------------+   (next generation planned)
//      v
//   FAILED  (failure budget spent, resource_wait_timeout passed, or an error that cannot be retried)
//   STOPPED (elastrain stop)
//
// RECOVERING and RESIZING last from the end of one generation to the start of the next;
// WAITING_FOR_RESOURCES while fewer than min_workers can run, for at most
// resource_wait_timeout. Every transition is an event with a reason (events.jsonl).
#pragma once

#include <string>

#include "common/status.h"

namespace elastrain {

enum class JobState { kPending, kRunning, kRecovering, kResizing, kWaitingForResources, kSucceeded, kFailed, kStopped };

const char* JobStateName(JobState s);  // "RUNNING", ...
Result<JobState> ParseJobState(const std::string& name);
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kStopped;
}

}  // namespace elastrain
