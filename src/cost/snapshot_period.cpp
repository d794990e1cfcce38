#include "cost/snapshot_period.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cost/interval.h"

namespace elastrain {

namespace {

double Median(const std::deque<double>& d) {
  if (d.empty()) return 0;
  std::vector<double> v(d.begin(), d.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

void Push(std::deque<double>* d, double v) {
  d->push_back(v);
  while (d->size() > SnapshotPeriodTuner::kWindow) d->pop_front();
}

}  // namespace

SnapshotChoice ChooseSnapshotInterval(double copy_seconds, double covered_mtti_seconds, double disk_interval_seconds) {
  SnapshotChoice c;
  const double sigma = copy_seconds > 0 ? copy_seconds : 0;  // also NaN
  const double m = covered_mtti_seconds > 0 ? covered_mtti_seconds : std::numeric_limits<double>::infinity();
  const bool disk = disk_interval_seconds > 0 && std::isfinite(disk_interval_seconds);
  c.interval_seconds = std::sqrt(2 * sigma * m);  // inf when failures never come and copies cost
  c.loss_on = sigma > 0 ? c.interval_seconds / m : 0;
  if (!std::isfinite(c.loss_on)) c.loss_on = 0;  // inf / inf: no failures, no loss worth the name
  c.loss_off = disk ? disk_interval_seconds / (2 * m) : std::numeric_limits<double>::infinity();
  c.on = sigma == 0 || !disk || c.interval_seconds < disk_interval_seconds / 2;  // inf < x: off
  return c;
}

int64_t SnapshotPeriodSteps(const SnapshotChoice& choice, double step_seconds, int64_t max_steps) {
  if (!choice.on) return 0;
  max_steps = std::max<int64_t>(max_steps, 1);
  if (!(step_seconds > 0)) return 1;
  const double steps = std::round(choice.interval_seconds / step_seconds);
  if (!(steps >= 1)) return 1;  // also NaN
  if (steps >= static_cast<double>(max_steps)) return max_steps;
  return static_cast<int64_t>(steps);
}

SnapshotPeriodTuner::SnapshotPeriodTuner(double prior_mtti_seconds, int64_t max_steps)
    : prior_mtti_seconds_(prior_mtti_seconds), max_steps_(std::max<int64_t>(max_steps, 1)) {}

bool SnapshotPeriodTuner::measured() const { return pairs_.size() >= kMinSamples; }

double SnapshotPeriodTuner::copy_seconds() const { return measured() ? std::max(0.0, Median(pairs_)) : 0; }

double SnapshotPeriodTuner::step_seconds() const { return measured() ? Median(without_) : 0; }

std::optional<SnapshotPeriodChange> SnapshotPeriodTuner::OnGenerationStart(int world, int64_t failures,
                                                                           double elapsed_seconds,
                                                                           int64_t disk_period_steps) {
  if (world != world_) {
    pairs_.clear();
    without_.clear();
    world_ = world;
  }
  previous_without_ = -1;  // the first step of a generation pairs with nothing
  failures_ = std::max<int64_t>(failures, 0);
  new_pairs_ = 0;
  evaluated_this_generation_ = false;
  return Evaluate(elapsed_seconds, disk_period_steps, measured() ? "generation_start" : "calibrating");
}

std::optional<SnapshotPeriodChange> SnapshotPeriodTuner::OnStep(double step_seconds, bool copy_in_flight,
                                                                double elapsed_seconds, int64_t disk_period_steps) {
  if (!(step_seconds > 0) || !std::isfinite(step_seconds)) {
    previous_without_ = -1;
    return std::nullopt;
  }
  const bool was_measured = measured();
  if (copy_in_flight) {
    if (previous_without_ < 0) return std::nullopt;  // no clean step just before: no pair
    Push(&pairs_, step_seconds - previous_without_);
    previous_without_ = -1;
    ++new_pairs_;
  } else {
    Push(&without_, step_seconds);
    previous_without_ = step_seconds;
  }
  if (!was_measured && measured()) {  // the calibration ends
    evaluated_this_generation_ = true;
    return Evaluate(elapsed_seconds, disk_period_steps, "copy_measured");
  }
  if (measured() && !evaluated_this_generation_ && new_pairs_ >= kMinSamples) {
    evaluated_this_generation_ = true;
    return Evaluate(elapsed_seconds, disk_period_steps, "copy_measured");
  }
  return std::nullopt;
}

std::optional<SnapshotPeriodChange> SnapshotPeriodTuner::Evaluate(double elapsed_seconds, int64_t disk_period_steps,
                                                                  const char* reason) {
  SnapshotPeriodChange c;
  c.failures = failures_;
  c.mtti_seconds = EstimatedMttiSeconds(static_cast<int>(std::min<int64_t>(failures_, 1 << 30)), elapsed_seconds,
                                        prior_mtti_seconds_);
  c.reason = reason;
  if (!measured()) {
    c.to = kCalibrationPeriod;
  } else {
    c.copy_seconds = copy_seconds();
    c.step_seconds = step_seconds();
    c.disk_interval_seconds = disk_period_steps > 0 ? static_cast<double>(disk_period_steps) * c.step_seconds : 0;
    const SnapshotChoice choice = ChooseSnapshotInterval(c.copy_seconds, c.mtti_seconds, c.disk_interval_seconds);
    c.to = SnapshotPeriodSteps(choice, c.step_seconds, max_steps_);
  }
  if (c.to == period_) return std::nullopt;
  c.from = period_;
  period_ = c.to;
  return c;
}

}  // namespace elastrain
