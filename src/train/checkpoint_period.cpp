#include "train/checkpoint_period.h"

#include <algorithm>

#include "cost/interval.h"

namespace elastrain {

CheckpointPeriodTuner::CheckpointPeriodTuner(double prior_mtti_seconds, int64_t min_steps, int64_t max_steps)
    : prior_mtti_seconds_(prior_mtti_seconds), min_steps_(min_steps), max_steps_(max_steps) {}

std::optional<CheckpointPeriodChange> CheckpointPeriodTuner::OnGenerationStart(int64_t failures,
                                                                               double elapsed_seconds) {
  failures_ = failures;
  measured_this_generation_ = false;
  return Evaluate(elapsed_seconds, "generation_start");
}

std::optional<CheckpointPeriodChange> CheckpointPeriodTuner::OnSaveMeasured(double save_seconds, double step_seconds,
                                                                            double elapsed_seconds) {
  if (measured_this_generation_) return std::nullopt;
  measured_this_generation_ = true;
  save_seconds_ = save_seconds;
  step_seconds_ = step_seconds;
  return Evaluate(elapsed_seconds, "save_measured");
}

std::optional<CheckpointPeriodChange> CheckpointPeriodTuner::Evaluate(double elapsed_seconds, const char* reason) {
  const int failures = static_cast<int>(std::min<int64_t>(failures_, 1 << 30));
  const int64_t to = AutoCheckpointPeriodSteps(save_seconds_, step_seconds_, failures, elapsed_seconds,
                                               prior_mtti_seconds_, min_steps_, max_steps_);
  if (to == period_) return std::nullopt;
  CheckpointPeriodChange c;
  c.from = period_;
  c.to = to;
  c.failures = failures_;
  c.mtti_seconds = EstimatedMttiSeconds(failures, elapsed_seconds, prior_mtti_seconds_);
  c.stall_seconds = save_seconds_;
  c.step_seconds = step_seconds_;
  c.reason = reason;
  period_ = to;
  return c;
}

}  // namespace elastrain
