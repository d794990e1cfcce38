#include "cost/checkpoint_period.h"

#include <algorithm>

#include "cost/interval.h"

namespace elastrain {

CheckpointPeriodTuner::CheckpointPeriodTuner(double prior_mtti_seconds, int64_t min_steps, int64_t max_steps,
                                             bool ram_tier)
    : prior_mtti_seconds_(prior_mtti_seconds), min_steps_(min_steps), max_steps_(max_steps), ram_tier_(ram_tier) {}

std::optional<CheckpointPeriodChange> CheckpointPeriodTuner::OnGenerationStart(int64_t failures,
                                                                               int64_t covered_failures,
                                                                               double elapsed_seconds) {
  failures_ = failures;
  covered_failures_ = ram_tier_ ? std::clamp<int64_t>(covered_failures, 0, std::max<int64_t>(failures, 0)) : 0;
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
  // Only the failures that went to disk count against the disk tier.
  const int failures = static_cast<int>(std::min<int64_t>(failures_ - covered_failures_, 1 << 30));
  const double fraction = ram_tier_ ? kRamTierUncoveredFraction : 1.0;
  const int64_t to = AutoCheckpointPeriodSteps(save_seconds_, step_seconds_, failures, elapsed_seconds,
                                               prior_mtti_seconds_, min_steps_, max_steps_, fraction);
  if (to == period_) return std::nullopt;
  CheckpointPeriodChange c;
  c.from = period_;
  c.to = to;
  c.failures = failures_;
  c.covered_failures = covered_failures_;
  c.mtti_seconds = EstimatedMttiSeconds(failures, elapsed_seconds, prior_mtti_seconds_, fraction);
  c.stall_seconds = save_seconds_;
  c.step_seconds = step_seconds_;
  c.reason = reason;
  period_ = to;
  return c;
}

}  // namespace elastrain
