// checkpoint_period=auto: which period the chief proposes, and when it changes. Pure
// logic over measurements the trainer or the launched worker feeds it (docs/cost.md,
// "checkpoint_period=auto").
//
// The period is AutoCheckpointPeriodSteps (cost/interval.h): Daly's interval for the
// save cost and the MTTI estimated from the job's failures so far, in steps. It is
// re-evaluated at two points only, so that step-time noise does not make it flicker:
//   - at the start of each generation: a failure ends a generation, so the job's failure
//     count and elapsed time are new (the measurements are this process's from earlier
//     generations, if it ran any);
//   - after the first save a generation measures (its world, and so its step time and
//     save cost, may differ from the last generation's).
// Until a save and a step are measured the period is min_steps: save early, to measure.
// With the RAM tier (ram_tier: memory_snapshot_period > 0 in a sharded job) the disk
// tier only answers the failures the RAM tier did not cover, so the estimate counts
// only those, and its prior is prior_mtti / kRamTierUncoveredFraction (cost/interval.h):
// covered failures lengthen nothing and shorten nothing.
// Not thread-safe; the thread of the trainer or of the launched worker's machine owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace elastrain {

struct CheckpointPeriodChange {
  int64_t from = 0;            // 0: this process had no period yet
  int64_t to = 0;
  int64_t failures = 0;        // the job's failures (all of them, covered or not)
  int64_t covered_failures = 0;  // of them, restored from peers (RAM tier); not in the estimate
  double mtti_seconds = 0;     // the estimated mean time to interrupt (to an uncovered one, with the RAM tier)
  double stall_seconds = 0;    // the save cost used (0: not measured yet)
  double step_seconds = 0;     // the step time used (0: not measured yet)
  std::string reason;          // generation_start | save_measured
};

class CheckpointPeriodTuner {
 public:
  // ram_tier: the job keeps RAM snapshots of its shards (false: every failure goes to disk).
  CheckpointPeriodTuner(double prior_mtti_seconds, int64_t min_steps, int64_t max_steps, bool ram_tier = false);

  // A generation starts; the job has had `failures`, `covered_failures` of which the RAM
  // tier covered (restored from peers), and has run `elapsed_seconds`. Without the RAM
  // tier covered_failures is ignored (every failure went to disk); it is clamped to
  // [0, failures]. Returns the change, if the period changes.
  std::optional<CheckpointPeriodChange> OnGenerationStart(int64_t failures, int64_t covered_failures,
                                                          double elapsed_seconds);
  // The same with no covered failures: every failure counts against the disk tier.
  std::optional<CheckpointPeriodChange> OnGenerationStart(int64_t failures, double elapsed_seconds) {
    return OnGenerationStart(failures, 0, elapsed_seconds);
  }
  // A save of this generation committed: `save_seconds` is its cost, `step_seconds` the
  // mean step time so far. Only the first save of each generation is taken; later ones
  // return nullopt.
  std::optional<CheckpointPeriodChange> OnSaveMeasured(double save_seconds, double step_seconds,
                                                       double elapsed_seconds);

  // memory_snapshot_period=auto turned the RAM tier on or off: from the next evaluation
  // (a generation start or a generation's first save) failures count accordingly.
  void SetRamTier(bool on) { ram_tier_ = on; }
  bool ram_tier() const { return ram_tier_; }

  int64_t period() const { return period_; }  // 0 before OnGenerationStart
  double save_seconds() const { return save_seconds_; }
  double step_seconds() const { return step_seconds_; }

 private:
  std::optional<CheckpointPeriodChange> Evaluate(double elapsed_seconds, const char* reason);

  const double prior_mtti_seconds_;
  const int64_t min_steps_, max_steps_;
  bool ram_tier_;
  int64_t period_ = 0;
  int64_t failures_ = 0, covered_failures_ = 0;
  double save_seconds_ = 0, step_seconds_ = 0;  // the latest measurements (0: none)
  bool measured_this_generation_ = false;
};

}  // namespace elastrain
