// Stragglers as a pure rule (issue 32): from the step anatomy each rank reports with its
// progress (WorkerRecord::compute_seconds over its last kAnatomyWindow steps), which
// ranks are slow, since when, and whether taking one out pays. No I/O, no clock: the
// Decider (elastic/policy.cpp) calls these with what the store shows and keeps the
// tracking in the persisted JobRecord, so a restarted head goes on where it was.
//
// The rule, in words:
//   - A rank is judged only on a full window (kAnatomyWindow timed steps of the current
//     generation), against the median of the *other* ranks' compute seconds per step
//     (a leave-one-out median: with two ranks, the other one; a slow rank never drags
//     its own yardstick). Compute, not step time: in a synchronous step every rank's step
//     lasts as long as the slowest one's; the others' extra time shows up as waiting.
//   - slowdown = its compute / that median. Above straggler_threshold, and at least
//     kMinStragglerExcessSeconds above that median, it is *slow* (the floor: a step of a
//     few milliseconds of compute measures 1.4-1.7x on a shared machine from scheduling
//     alone -- `tiny` in test_observability -- and costs nothing worth acting on); it
//     is named (straggler_detected) once it has stayed slow over
//     straggler_persistence_steps consecutive steps *and* kMinStragglerPersistenceSeconds
//     (every judgement in between slow): ten steps of a few milliseconds are a moment
//     of a busy scheduler, not a slow host (`tiny` jobs beside other tests were named).
//   - A named straggler is cleared (straggler_cleared) when a full window shows it below
//     the midpoint between 1 and the threshold (hysteresis: no flapping at the edge).
//   - Fewer than two ranks with a full window: nobody is judged.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "wire/events.h"
#include "wire/protocol.h"

namespace elastrain {

// The seconds a re-plan is assumed to cost before one has been measured (the recovery of
// a generation change: stop at a boundary, plan, restore, first step).
inline constexpr double kDefaultReplanSeconds = 10;
// A slow rank's compute must exceed the others' median by at least this per step: a few
// scheduler time slices, below which a shared machine's noise is as large as the gap.
inline constexpr double kMinStragglerExcessSeconds = 0.02;
// ... and stay slow for at least this long (as well as straggler_persistence_steps).
inline constexpr double kMinStragglerPersistenceSeconds = 3;

struct StragglerSettings {
  double threshold = 1.35;
  int64_t persistence_steps = 10;
  StragglerPolicy policy = StragglerPolicy::kAlert;
};

// One member of the running generation, with its anatomy as its record reports it.
struct RankTiming {
  int rank = -1;
  std::string worker, host;
  double compute_seconds = 0, wait_seconds = 0;  // means per step over the window
  int64_t timed_steps = 0, timed_until_step = -1;
};

struct StragglerJudgement {
  std::vector<StragglerDetectedEvent> detected;  // named now
  std::vector<StragglerClearedEvent> cleared;    // back to pace now
  std::vector<std::string> refused;              // records not judged, and why (logged)
};

// Judges generation `generation`'s ranks and updates `tracks` (worker id -> tracking; the
// JobRecord's). Tracks of other generations, or of workers no longer in `ranks`, are
// dropped (a named one is cleared with reason "generation ended"). `step` is the newest
// step the controller has seen (for the events), `now` the observation's time.
StragglerJudgement JudgeStragglers(const std::vector<RankTiming>& ranks, int64_t generation, int64_t step, double now,
                                   const StragglerSettings& s, std::map<std::string, StragglerTrack>* tracks);

// Whether re-planning without `out` (the named stragglers' ranks) pays, and the figures:
//   now_step  = the median over ranks of compute + wait (the synchronous step's pace)
//   next_step = the median compute of the others x world / next_world (the same global
//               batch over next_world ranks: world - |out|, or more where idle spares take
//               the stragglers' places) + what of now_step is not the slowest straggler's
//               compute (the communication every rank pays; not the straggler's own wait,
//               which a CPU throttle inflates with the time it is frozen in all-reduces)
//   gain      = remaining_steps x (now_step - next_step); it pays when gain > cost, with
//               cost = the last measured re-plan (recovery), else the job's own start
//               (its first generation, planned to first step: the same process start,
//               rendezvous and first step a re-plan repeats, without the restore), else
//               kDefaultReplanSeconds.
struct ExclusionCase {
  double now_step_seconds = 0, next_step_seconds = 0;
  double expected_gain_seconds = 0, replan_cost_seconds = 0;
  bool pays = false;
  std::string reason;  // the sentence for host_excluded or for the log when it does not pay
};
struct ReplanCost {
  double seconds = 0;       // 0: none measured (kDefaultReplanSeconds is assumed)
  std::string measured_as;  // what measured it, for the reason
};
// `next_world` <= 0 means world - |out| (no spare).
ExclusionCase WeighExclusion(const std::vector<RankTiming>& ranks, const std::vector<int>& out,
                             int64_t remaining_steps, const ReplanCost& cost, int next_world = 0);

}  // namespace elastrain
