// checkpoint_period=auto: which period the chief proposes, and when it changes. Pure
// logic over measurements the trainer feeds it (docs/cost.md, "checkpoint_period=auto").
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
// Not thread-safe; the trainer's thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace elastrain {

struct CheckpointPeriodChange {
  int64_t from = 0;            // 0: this process had no period yet
  int64_t to = 0;
  int64_t failures = 0;        // the job's failures counted in the estimate
  double mtti_seconds = 0;     // the estimated mean time to interrupt
  double stall_seconds = 0;    // the save cost used (0: not measured yet)
  double step_seconds = 0;     // the step time used (0: not measured yet)
  std::string reason;          // generation_start | save_measured
};

class CheckpointPeriodTuner {
 public:
  CheckpointPeriodTuner(double prior_mtti_seconds, int64_t min_steps, int64_t max_steps);

  // A generation starts; the job has had `failures` and has run `elapsed_seconds`.
  // Returns the change, if the period changes.
  std::optional<CheckpointPeriodChange> OnGenerationStart(int64_t failures, double elapsed_seconds);
  // A save of this generation committed: `save_seconds` is its cost, `step_seconds` the
  // mean step time so far. Only the first save of each generation is taken; later ones
  // return nullopt.
  std::optional<CheckpointPeriodChange> OnSaveMeasured(double save_seconds, double step_seconds,
                                                       double elapsed_seconds);

  int64_t period() const { return period_; }  // 0 before OnGenerationStart
  double save_seconds() const { return save_seconds_; }
  double step_seconds() const { return step_seconds_; }

 private:
  std::optional<CheckpointPeriodChange> Evaluate(double elapsed_seconds, const char* reason);

  const double prior_mtti_seconds_;
  const int64_t min_steps_, max_steps_;
  int64_t period_ = 0;
  int64_t failures_ = 0;
  double save_seconds_ = 0, step_seconds_ = 0;  // the latest measurements (0: none)
  bool measured_this_generation_ = false;
};

}  // namespace elastrain
