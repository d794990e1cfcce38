// Process exit codes: how `elastrain` commands and worker processes end. The agent reads a
// worker's code to tell a failure (counted against max_failures) from a preemption (not
// counted); scripts read the CLI's. Documented in README.md ("Exit codes").
#pragma once

namespace elastrain {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;      // a runtime failure: I/O error, lost peer, failure budget spent, ...
inline constexpr int kExitBadConfig = 2;    // the configuration or the command line cannot run
inline constexpr int kExitPreempted = 3;    // left after a preemption notice (SIGTERM), state saved
inline constexpr int kExitStopped = 4;      // stopped by `elastrain stop`; the same command resumes it
inline constexpr int kExitBadAnswer = 5;    // a job command could not read the API's answer (not JSON, wrong
                                            // types, missing fields: not an elastrain head, or another version)

}  // namespace elastrain
