// Monte Carlo of a training job under interruptions, through a recovery model that
// mirrors the elastic controller (docs/elastic.md): an interruption takes hosts; after
// `detection_seconds` the controller restarts the job from its last checkpoint
// (`restart_seconds`, restore included), losing the work since; a job that needs its
// full world waits for replacements first, an elastic one (min_hosts < hosts) goes on
// with the hosts it has, at proportionally lower speed, and takes replacements back at
// the next checkpoint (a `resize_seconds` pause, no work lost). Interruptions strike in
// every phase (work, checkpoint, detection, restart, waiting), which is what Daly's
// closed form assumes (cost/interval.h). With the RAM tier (ram_tier_coverage > 0) each
// interruption is covered with that probability: it loses only the work since the last
// RAM snapshot (or checkpoint, if newer) and restarts from peers in
// `peer_restore_seconds`; an uncovered one goes back to disk as above. A trace's events may say when their hosts return and whether they came with a
// notice (nothing lost: cost/preemption.h). Model and defaults: docs/cost.md.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/status.h"
#include "cost/preemption.h"

namespace elastrain {

struct SimJob {
  double work_seconds = 0;        // failure-free compute time at the full world
  int hosts = 1;                  // the full world
  int min_hosts = 1;              // < hosts: elastic (runs with fewer)
  double interval_seconds = 0;    // tau: compute seconds between checkpoints
  double checkpoint_seconds = 0;  // delta: a save blocks training this long
  double detection_seconds = 0;   // interruption -> the controller acts
  double restart_seconds = 0;     // restart + restore from the last checkpoint
  double resize_seconds = 0;      // replacements joining at a checkpoint
  double usd_per_host_hour = 0;   // hosts are billed while they are held
  // The RAM tier (cost/interval.h): 0 coverage is a disk-only job, exactly as without it.
  double ram_tier_coverage = 0;        // P(an interruption is covered), in [0, 1]
  double snapshot_period_seconds = 0;  // compute seconds between RAM snapshots (0: every instant)
  double peer_restore_seconds = 0;     // restart + restore from peers after a covered one
  double snapshot_copy_seconds = 0;    // what each snapshot adds to the wall time (booked as checkpoint)
  // > 0: the trial ends at this wall time (a window of a longer job, e.g. a replayed
  // trace's), finished, with its time by category; work_seconds then only needs to be
  // more than the window holds.
  double horizon_seconds = 0;
};

// Where a trial's wall seconds went, in the categories of the measured goodput
// (monitor/goodput.h), so that a prediction and a run compare line by line:
//   productive  computing work never done before (at whatever world size);
//   redone      computing work an interruption had thrown away (since the last
//               checkpoint, or RAM snapshot when covered);
//   recovery    detection, restart and restore, and replacements joining at a checkpoint;
//   checkpoint  blocking checkpoint saves, and the RAM tier's copies (snapshot_copy_seconds each);
//   waiting     fewer than min_hosts hosts: waiting for replacements.
// (Initialisation is outside the model: it starts with the first step.)
struct SimBreakdown {
  double productive = 0, redone = 0, recovery = 0, checkpoint = 0, waiting = 0;
  double total() const { return productive + redone + recovery + checkpoint + waiting; }
  double goodput() const { return total() > 0 ? productive / total() : 0; }
};

struct SimTrial {
  double completion_seconds = 0;
  double cost_usd = 0;
  int interruptions = 0;
  int covered = 0;       // of them, restored from peers (RAM tier)
  bool finished = true;  // false: gave up at kMaxSimulatedFactor x work_seconds
  SimBreakdown seconds;  // completion_seconds by category
};

struct SimSummary {
  std::vector<SimTrial> trials;
  double mean_seconds = 0, p50_seconds = 0, p90_seconds = 0;
  double mean_cost = 0, p50_cost = 0, p90_cost = 0;
  double mean_interruptions = 0;
  double mean_covered = 0;  // interruptions the RAM tier covered, per trial
  SimBreakdown mean_breakdown;  // per category, mean over trials
  int unfinished = 0;
};

// A trial that has not finished after this many times its failure-free work gives up.
constexpr double kMaxSimulatedFactor = 1000;

// One trial. `trace` non-empty: its events are the interruptions (replayed as-is from
// the job's start; none after the last); otherwise `failures` draws them.
SimTrial SimulateTrial(const SimJob& job, const PreemptionModel& failures, const std::vector<PreemptionEvent>& trace,
                       std::mt19937_64& rng);
// `trials` trials from `seed`; the same inputs give the same summary.
Result<SimSummary> Simulate(const SimJob& job, const PreemptionModel& failures,
                            const std::vector<PreemptionEvent>& trace, int trials, uint64_t seed);

}  // namespace elastrain
