// Which rank a hung generation waits for (issue 32), as a pure rule over what the members
// last reported: the collective each entered last (a per-worker sequence number over all
// its groups, its kind, whether it was still inside; WorkerRecord::collective_*) and when
// each last said anything. Like PyTorch's Flight Recorder, it names the rank behind
// instead of ending every member alike.
//
// The rule, in words:
//   - A member that is gone (its host lost), that its agent killed as hung, or that has
//     been silent for kSilentSeconds while others talk, is behind: a stopped or frozen
//     process, or a host cut off mid-collective.
//   - Otherwise the members that entered fewer collectives than the furthest member are
//     behind: the others are blocked in a collective they never joined (a rank that
//     diverged, or is stuck computing).
//   - Otherwise nobody is behind: every member is inside the same collective, and the
//     event says so (the link between them, not a rank).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire/events.h"

namespace elastrain {

// Silence that makes a member "behind" while others talk: twelve missed 250 ms progress
// ticks, beyond the store's report cadence on a loaded machine.
inline constexpr double kSilentSeconds = 3;

struct HangMember {
  int rank = -1;
  std::string worker, host;
  int64_t collective_seq = -1;
  std::string collective_kind;
  bool in_collective = false;
  double last_progress = 0;  // wall seconds (0: never reported)
  bool gone = false;         // lost with its host, or killed by its agent as hung
  bool reported = true;      // false: no record of it is left (its host's reports expired with it)
};

// The diagnosis of generation `generation` at wall time `now`; `trigger` is
// silent_rank | collective_timeout | stalled.
HangDiagnosedEvent DiagnoseHang(int64_t generation, const std::vector<HangMember>& members, double now,
                                const std::string& trigger);

}  // namespace elastrain
