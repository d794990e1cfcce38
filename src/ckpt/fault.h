// Fault injection for the checkpoint writer (tests only; see ckpt/checkpoint.h for the
// points). Read from ELASTRAIN_CKPT_FAULT on every call, so a test may set and unset
// it between calls, and forked children inherit it.
#pragma once

#include <string>

namespace elastrain::ckpt {

enum class FaultPoint { kCrashAfterShard, kCrashBeforeManifest, kCrashBeforeCommit, kCrashBeforeLatest, kFailWrite };

inline constexpr char kFaultEnv[] = "ELASTRAIN_CKPT_FAULT";

// True when ELASTRAIN_CKPT_FAULT names `p` and its optional @substring occurs in `path`.
bool FaultArmed(FaultPoint p, const std::string& path);
// Kills the process with SIGKILL (as a preemption would) when `p` is armed.
void MaybeCrash(FaultPoint p, const std::string& path);

}  // namespace elastrain::ckpt
