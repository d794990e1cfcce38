// A host's health check (issue 32), as its agent runs it: the built-in steps, always run,
// then the operator's command (`elastrain agent --health-check CMD`), each bounded in
// time. The result is a HealthRecord (wire/protocol.h) that the agent writes to
// elastrain/health/<host>; the controller decides from it (elastic/health_gate.h).
//
// The steps, in order (the first failing one is the reason):
//   1. the store answers within its request timeout (the `store_reachable` callback);
//   2. the run directory is writable: a file is created, written and removed;
//   3. the built-in probe: a GEMM (a plain loop: elastic/ does not link kernels/) and a
//      memory copy through two buffers of kProbeCopyBytes (8 MB a run), each the best of
//      several short runs (each within one scheduler slice) inside a time
//      budget (about 0.1 s each): what the hardware can do, not what one busy moment on a
//      shared machine gives. Its figures are compared with the other hosts' by the gate;
//      alone they fail nothing;
//   4. the command, run by /bin/sh -c in its own process group with a timeout: exit 0 is
//      healthy; otherwise (an exit code, a signal, the timeout) the reason is how it
//      ended and the tail of its output (stdout and stderr, at most kHealthOutputLimit
//      bytes).
//
// Threading: RunHealthCheck blocks (up to the command's timeout plus about a second);
// the agent runs it on a thread of its own while it is up. Every function here is
// reentrant.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "common/status.h"
#include "wire/protocol.h"

namespace elastrain {

// The default --health-check-timeout and --health-check-period.
inline constexpr std::chrono::milliseconds kDefaultHealthCheckTimeout{30000};
inline constexpr double kDefaultHealthCheckPeriodSeconds = 60;
// A record lives this many renewal intervals (a missed write or two does not expire it).
inline constexpr double kHealthRecordPeriods = 3;
// The most of a command's output kept as the reason (its tail: where errors are).
inline constexpr size_t kHealthOutputLimit = 2048;
// The built-in probe: the bytes its memory copy moves per run, and each part's budget.
inline constexpr size_t kProbeCopyBytes = size_t{64} << 20;  // each of its two buffers
inline constexpr std::chrono::milliseconds kProbeBudget{100};

struct HealthCheckOptions {
  std::string command;  // run by /bin/sh -c; empty: the built-in steps only
  std::chrono::milliseconds timeout = kDefaultHealthCheckTimeout;  // the command's
  std::string run_dir;  // checked writable; empty: not checked (no job yet)
  bool probe = true;    // run the built-in probe (tests turn it off)
  // Ok when the store answers within its request timeout; null: not checked.
  std::function<Status()> store_reachable;
  // True once the check should give up (the agent is stopping): the command is killed at
  // the next poll and the check fails. Null: never.
  std::function<bool()> cancelled;
};

struct ProbeFigures {
  double gemm_gflops = 0;  // best of its runs
  double memory_gbps = 0;  // bytes read + written per second, best of its runs
};
// The built-in probe, within about 2 x `budget`. A figure is 0 when its buffers cannot be
// allocated.
ProbeFigures RunProbe(std::chrono::milliseconds budget = kProbeBudget);

// Creates, writes and removes a file in `dir`; the error names the path.
Status CheckWritable(const std::string& dir);

struct CommandResult {
  bool ok = false;
  std::string reason;  // how it ended and the tail of its output; "" when ok
};
// Runs `command` with /bin/sh -c, waits up to `timeout` (or until `cancelled` says so),
// then SIGKILLs its process group.
CommandResult RunCheckCommand(const std::string& command, std::chrono::milliseconds timeout,
                              size_t output_limit = kHealthOutputLimit, const std::function<bool()>& cancelled = {});

// Every step, as the header says. `host`, `agent` and `now` (wall seconds) stamp the
// record; it expires at now + kHealthRecordPeriods x `lifetime_period` seconds.
HealthRecord RunHealthCheck(const HealthCheckOptions& opt, const std::string& host, const std::string& agent,
                            double lifetime_period);

}  // namespace elastrain
