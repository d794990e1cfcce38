// memory_snapshot_period=auto: whether the RAM tier pays for itself, and its period. Pure
// logic over measurements the trainer feeds it (docs/cost.md, "memory_snapshot_period=auto").
//
// The model, per second of training. A copy of every shard to its buddies costs sigma
// seconds of step time (measured: a step during which a copy is in flight against the
// step just before it, without one; the median of those differences, so that a slow
// stretch -- a replacement worker starting on the same cores -- weighs on both sides). Failures the tier covers strike every M_c seconds on average; each loses
// the work since the newest copy, x/2 on average with a copy every x seconds, where
// without the tier it loses the work since the disk checkpoint, tau/2 (restart and
// restore are taken as equal either way: a restore from peers is faster, so this errs
// against the tier). So
//     loss_on(x) = sigma / x + x / (2 M_c),   least at x* = sqrt(2 sigma M_c)
//                  (Young's interval, the copy as the checkpoint), where it is x* / M_c;
//     loss_off   = tau / (2 M_c).
// The tier is on when x* < tau / 2 (its best loss is below the disk tier's), at
// round(x* / step) steps (at least 1); off otherwise. A copy that costs nothing
// (sigma <= 0) keeps it on at every step; no disk checkpoint (tau infinite) keeps it on.
// M_c is estimated as checkpoint_period=auto estimates the MTTI (EstimatedMttiSeconds,
// cost/interval.h): the job's failures so far with one pseudo-failure at the prior.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace elastrain {

struct SnapshotChoice {
  bool on = true;
  double interval_seconds = 0;  // x*, the compute seconds between copies (0: every step)
  double loss_on = 0;           // fraction of time lost with the tier at x*
  double loss_off = 0;          // fraction of time lost without it
};
// The choice above. copy_seconds: sigma (<= 0 or NaN: free); covered_mtti_seconds: M_c
// (> 0; +inf: no failures, the tier is off unless it is free); disk_interval_seconds: tau
// (<= 0, NaN or +inf: no disk checkpoint, the tier stays on).
SnapshotChoice ChooseSnapshotInterval(double copy_seconds, double covered_mtti_seconds,
                                      double disk_interval_seconds);
// The period in steps of a choice: 0 when off, else round(interval / step) in [1, max_steps].
int64_t SnapshotPeriodSteps(const SnapshotChoice& choice, double step_seconds, int64_t max_steps);

struct SnapshotPeriodChange {
  int64_t from = -1;           // -1: this process had no period yet
  int64_t to = 0;              // 0: the tier is off
  int64_t failures = 0;        // the job's failures so far
  double mtti_seconds = 0;     // M_c, estimated
  double copy_seconds = 0;     // sigma, measured (0 while calibrating)
  double step_seconds = 0;     // a step without a copy in flight, measured
  double disk_interval_seconds = 0;  // tau (0: no disk checkpoint)
  std::string reason;          // calibrating | generation_start | copy_measured
};

// Feeds ChooseSnapshotInterval from the chief's step times. Until the copy cost is
// measured (kMinSamples pairs of a step without a copy and the next step with one, of
// the current world size) the period is kCalibrationPeriod, so that such pairs occur. Then it
// is re-evaluated at each generation start (new failures) and once per generation when
// the generation's measurements are in (kMinSamples new pairs; none come at period 0 or
// 1), so that noise does not make it flicker. Not thread-safe: the trainer thread owns it.
class SnapshotPeriodTuner {
 public:
  static constexpr int64_t kCalibrationPeriod = 2;
  static constexpr size_t kMinSamples = 6;
  static constexpr size_t kWindow = 24;  // the newest pairs (and steps without a copy) kept

  SnapshotPeriodTuner(double prior_mtti_seconds, int64_t max_steps);

  // A generation of `world` ranks starts; the job has had `failures` in `elapsed_seconds`;
  // the disk checkpoint comes every `disk_period_steps` (0: none). Samples of another
  // world size are dropped (its steps took other times).
  std::optional<SnapshotPeriodChange> OnGenerationStart(int world, int64_t failures, double elapsed_seconds,
                                                        int64_t disk_period_steps);
  // A step took `step_seconds`; `copy_in_flight`: a copy went out during it. Steps must
  // come in order, one call each (a pair is a step with a copy after one without).
  std::optional<SnapshotPeriodChange> OnStep(double step_seconds, bool copy_in_flight, double elapsed_seconds,
                                             int64_t disk_period_steps);

  int64_t period() const { return period_; }  // 0: off; -1 before OnGenerationStart
  bool measured() const;
  double copy_seconds() const;   // median of (with - the step before, without), >= 0; 0 until measured
  double step_seconds() const;   // median of steps without a copy; 0 until measured

 private:
  std::optional<SnapshotPeriodChange> Evaluate(double elapsed_seconds, int64_t disk_period_steps, const char* reason);

  const double prior_mtti_seconds_;
  const int64_t max_steps_;
  int world_ = 0;
  int64_t failures_ = 0;
  int64_t period_ = -1;
  std::deque<double> pairs_;      // a step with a copy minus the step before it, without one
  std::deque<double> without_;    // steps without a copy
  double previous_without_ = -1;  // the step just before, when it had no copy (-1: it had, or none)
  size_t new_pairs_ = 0;  // this generation's
  bool evaluated_this_generation_ = false;
};

}  // namespace elastrain
