// Fault injection: the one mechanism by which tests and rehearsals make elastrain fail
// on purpose, so that error and recovery paths are tested, not hoped for.
//
// Code that can fail on purpose names a fault point and asks, at that point, whether it
// fires here: `if (fault::Fires(fault::Point::kFailWrite, {.path = tmp})) ...`. A point
// fires when a fault armed for it matches the context. Faults are armed two ways:
//   - ELASTRAIN_FAULT, read at every Fires (so a test may set and unset it; forked and
//     launched children inherit it):
//       ELASTRAIN_FAULT = fault[,fault...]
//       fault           = point[@condition[:condition...]]
//       condition       = gen=N | rank=N | step=N     (N a decimal integer >= 0)
//                       | path=TEXT                    (a substring; no ',' ':' or '@')
//     e.g. kill_after_update@gen=0:rank=1:step=6,crash_before_commit@path=step_00000020.
//     A condition the point's context does not carry is an error (ParseFaults names it).
//   - A front-end: ArmFaults(origin, faults) arms faults from elsewhere, e.g. the config
//     keys fail_at_step/fail_rank/fail_mode (train/rehearsal.h), replacing that origin's
//     earlier faults.
// Every point is listed, with where it fires and what it does, in FaultPoints() and in
// docs/faults.md (a unit test keeps the two equal).
//
// Thread-safety: every function here may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace elastrain::fault {

inline constexpr char kEnv[] = "ELASTRAIN_FAULT";

enum class Point {
  // ckpt/: the checkpoint writer (context: path).
  kCrashAfterShard,
  kCrashBeforeManifest,
  kCrashBeforeCommit,
  kCrashBeforeLatest,
  kFailWrite,
  // train/: one rank of a generation (context: gen, rank, step).
  kKillAfterUpdate,
  kExitAfterStep,
  kKillAfterStep,
  kHangAfterStep,
  kPreemptAfterStep,
  kKillMidSnapshot,
};

// The conditions a point's context carries (a bit set).
enum Key : unsigned { kGen = 1, kRank = 2, kStep = 4, kPath = 8 };

struct PointInfo {
  Point point;
  const char* name;      // its word in ELASTRAIN_FAULT
  unsigned keys;         // the conditions it accepts (Key bits)
  const char* where;     // where it fires (file: function)
  const char* effect;    // what it does when it fires
};
// Every point, in the order of Point.
const std::vector<PointInfo>& FaultPoints();
const PointInfo& Info(Point p);

// Where a point is reached; a field left at its default is not part of the context.
struct Context {
  std::string_view path = {};
  int64_t generation = -1;
  int rank = -1;
  int64_t step = -1;
};

// One armed fault: a point and the conditions under which it fires (none: always).
struct Fault {
  Point point = Point::kFailWrite;
  std::optional<int64_t> generation, rank, step;
  std::optional<std::string> path;

  bool Matches(Point p, const Context& c) const;
  bool operator==(const Fault&) const = default;
};

// The ELASTRAIN_FAULT grammar above. "" is no faults. Any other malformed text (an
// unknown point, a condition the point does not carry, a bad number, an empty item) is
// an InvalidArgument naming the item and what was expected.
Result<std::vector<Fault>> ParseFaults(std::string_view text);
// The inverse of ParseFaults for one fault ("kill_after_update@gen=0:rank=1:step=6").
std::string FormatFault(const Fault& f);

// Checks ELASTRAIN_FAULT (main calls it first, so a typo is a usage error, not a fault
// that silently never fires).
Status CheckEnvironment();

// Arms `faults` under `origin` (a front-end's name, e.g. "fail_at_step"), replacing
// what that origin armed before; an empty list disarms it.
void ArmFaults(const std::string& origin, std::vector<Fault> faults);

// True when a fault armed for `p` (in ELASTRAIN_FAULT or by a front-end) matches `c`;
// logs a warning naming the point, the context and the origin when it does. A malformed
// ELASTRAIN_FAULT arms nothing (and is logged once).
bool Fires(Point p, const Context& c);

// SIGKILLs this process (as a preemption or the OOM killer would) when `p` fires.
void CrashIfFires(Point p, const Context& c);
// SIGKILLs this process now, after flushing the log.
[[noreturn]] void Crash();

}  // namespace elastrain::fault
