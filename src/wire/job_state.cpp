#include "wire/job_state.h"

namespace elastrain {

namespace {
constexpr struct {
  JobState state;
  const char* name;
} kNames[] = {{JobState::kPending, "PENDING"},
              {JobState::kRunning, "RUNNING"},
              {JobState::kRecovering, "RECOVERING"},
              {JobState::kResizing, "RESIZING"},
              {JobState::kWaitingForResources, "WAITING_FOR_RESOURCES"},
              {JobState::kSucceeded, "SUCCEEDED"},
              {JobState::kFailed, "FAILED"},
              {JobState::kStopped, "STOPPED"}};
}  // namespace

const char* JobStateName(JobState s) {
  for (const auto& n : kNames)
    if (n.state == s) return n.name;
  return "UNKNOWN";
}

Result<JobState> ParseJobState(const std::string& name) {
  for (const auto& n : kNames)
    if (name == n.name) return n.state;
  return Status::Corruption("job state '" + name + "': expected one of PENDING, RUNNING, RECOVERING, RESIZING, "
                            "WAITING_FOR_RESOURCES, SUCCEEDED, FAILED, STOPPED");
}

}  // namespace elastrain
