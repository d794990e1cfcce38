#include "cost/interval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace elastrain {

double YoungInterval(double checkpoint_seconds, double mtti_seconds) {
  return std::sqrt(2.0 * checkpoint_seconds * mtti_seconds);
}

double DalyInterval(double checkpoint_seconds, double mtti_seconds) {
  const double d = checkpoint_seconds, m = mtti_seconds;
  if (d >= 2.0 * m) return m;
  const double x = d / (2.0 * m);
  return std::sqrt(2.0 * d * m) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - d;
}

double DalyExpectedWallTime(double work_seconds, double interval_seconds, double checkpoint_seconds,
                            double mtti_seconds, double restart_seconds) {
  const double m = mtti_seconds;
  // expm1 keeps the small-exponent case (failures rare) accurate.
  const double t = m * std::exp(restart_seconds / m) * std::expm1((interval_seconds + checkpoint_seconds) / m) *
                   work_seconds / interval_seconds;
  return std::isfinite(t) ? t : std::numeric_limits<double>::infinity();
}

Status CheckIntervalInputs(double checkpoint_seconds, double mtti_seconds, double restart_seconds) {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!positive(checkpoint_seconds))
    return Status::InvalidArgument(fmt::format("--checkpoint-seconds={}: expected a number > 0", checkpoint_seconds));
  if (!positive(mtti_seconds))
    return Status::InvalidArgument(fmt::format("--mtti-seconds={}: expected a number > 0", mtti_seconds));
  if (!std::isfinite(restart_seconds) || restart_seconds < 0)
    return Status::InvalidArgument(fmt::format("--restart-seconds={}: expected a number >= 0", restart_seconds));
  return Status::OK();
}

double UncoveredMttiSeconds(double mtti_seconds, double coverage) {
  if (!(coverage > 0)) return mtti_seconds;  // also NaN
  if (coverage >= 1) return std::numeric_limits<double>::infinity();
  return mtti_seconds / (1.0 - coverage);
}

double RamTierExpectedWallTime(double work_seconds, double interval_seconds, double checkpoint_seconds,
                               double mtti_seconds, double restart_seconds, const RamTierCost& tier) {
  if (!(tier.coverage > 0))
    return DalyExpectedWallTime(work_seconds, interval_seconds, checkpoint_seconds, mtti_seconds, restart_seconds);
  const double c = std::min(tier.coverage, 1.0), m = mtti_seconds;
  const double stretch = 1 + c * std::expm1(tier.recovery_seconds / m) + c * tier.snapshot_period_seconds / (2 * m);
  const double segment = stretch * (interval_seconds + checkpoint_seconds);
  const double mu = UncoveredMttiSeconds(m, c);
  // Daly's form with the stretched segment: its "checkpoint" is what the segment adds to tau.
  const double t = std::isinf(mu) ? segment * work_seconds / interval_seconds
                                  : DalyExpectedWallTime(work_seconds, interval_seconds, segment - interval_seconds,
                                                         mu, restart_seconds);
  return std::isfinite(t) ? t : std::numeric_limits<double>::infinity();
}

double EstimatedMttiSeconds(int failures_seen, double elapsed_seconds, double prior_mtti_seconds,
                            double prior_uncovered_fraction) {
  const double elapsed = std::isfinite(elapsed_seconds) ? std::max(elapsed_seconds, 0.0) : 0.0;
  const bool fraction_ok = prior_uncovered_fraction > 0 && prior_uncovered_fraction <= 1;  // false for NaN
  const double prior = fraction_ok ? prior_mtti_seconds / prior_uncovered_fraction : prior_mtti_seconds;
  return (prior + elapsed) / (1.0 + std::max(failures_seen, 0));
}

int64_t AutoCheckpointPeriodSteps(double save_stall_seconds, double step_seconds, int failures_seen,
                                  double elapsed_seconds, double prior_mtti_seconds, int64_t min_steps,
                                  int64_t max_steps, double prior_uncovered_fraction) {
  min_steps = std::max<int64_t>(min_steps, 1);
  max_steps = std::max(max_steps, min_steps);
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!positive(save_stall_seconds) || !positive(step_seconds) || !positive(prior_mtti_seconds)) return min_steps;
  const double mtti = EstimatedMttiSeconds(failures_seen, elapsed_seconds, prior_mtti_seconds, prior_uncovered_fraction);
  const double steps = std::round(DalyInterval(save_stall_seconds, mtti) / step_seconds);
  if (!(steps >= static_cast<double>(min_steps))) return min_steps;  // also NaN
  if (steps >= static_cast<double>(max_steps)) return max_steps;
  return static_cast<int64_t>(steps);
}

}  // namespace elastrain
