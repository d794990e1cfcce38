// Process exit codes: how `elastrain` commands and worker processes end. The agent reads a
// worker's code to tell a failure (counted against max_failures) from a preemption (not
// counted); scripts read the CLI's. Documented in README.md ("Exit codes").
#pragma once

#include "wire/job_state.h"

namespace elastrain {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;      // a runtime failure: I/O error, lost peer, failure budget spent, ...
inline constexpr int kExitBadConfig = 2;    // the configuration or the command line cannot run
inline constexpr int kExitPreempted = 3;    // left after a preemption notice (SIGTERM), state saved
inline constexpr int kExitStopped = 4;      // stopped by `elastrain stop`; the same command resumes it

// How a command that ran a job to its end exits (the one map from job state to code).
inline int ExitCodeForJobState(JobState s) {
  if (s == JobState::kSucceeded) return kExitSuccess;
  if (s == JobState::kStopped) return kExitStopped;
  return kExitFailure;
}

}  // namespace elastrain
