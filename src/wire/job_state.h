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

#include <array>
#include <string>

#include "common/choice.h"
#include "common/status.h"

namespace elastrain {

enum class JobState { kPending, kRunning, kRecovering, kResizing, kWaitingForResources, kSucceeded, kFailed, kStopped };

// The words of the states (the API's, events.jsonl's and the job record's).
inline constexpr std::array<Choice<JobState>, 8> kJobStateChoices = {{
    {"PENDING", JobState::kPending},
    {"RUNNING", JobState::kRunning},
    {"RECOVERING", JobState::kRecovering},
    {"RESIZING", JobState::kResizing},
    {"WAITING_FOR_RESOURCES", JobState::kWaitingForResources},
    {"SUCCEEDED", JobState::kSucceeded},
    {"FAILED", JobState::kFailed},
    {"STOPPED", JobState::kStopped},
}};

const char* JobStateName(JobState s);  // "RUNNING", ...
// Corruption "job state 'x': expected one of PENDING, ..." for a word not in the table
// (a record read back from disk or another process).
Result<JobState> ParseJobState(const std::string& name);
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kStopped;
}

}  // namespace elastrain
