// memory_snapshot_period=auto (cost/snapshot_period.h): whether the RAM tier is kept, at
// which period, and when the chief's choice changes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cost/snapshot_period.h"

namespace elastrain {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ChooseSnapshotInterval, YoungsIntervalWithTheCopyAsTheCheckpoint) {
  // sigma 0.05 s, a covered failure every 100 s: x* = sqrt(2 * 0.05 * 100) = sqrt(10).
  const SnapshotChoice c = ChooseSnapshotInterval(0.05, 100, 60);
  EXPECT_TRUE(c.on);
  EXPECT_NEAR(c.interval_seconds, std::sqrt(10.0), 1e-12);
  // At x* the copies and the lost work cost the same: sigma / x* = x* / 2M, total x* / M.
  EXPECT_NEAR(c.loss_on, 0.05 / c.interval_seconds + c.interval_seconds / 200, 1e-12);
  EXPECT_NEAR(c.loss_off, 60.0 / 200, 1e-12);
  EXPECT_EQ(SnapshotPeriodSteps(c, 0.25, 1000), 13);  // 3.162 / 0.25 = 12.6
}

TEST(ChooseSnapshotInterval, OffWhenItsBestIntervalIsNotBelowHalfTheDiskInterval) {
  // x* = sqrt(2 * 0.05 * 1000) = 10 s: with a save every 30 s it pays (10 < 15), every
  // 20 s it does not (10 >= 10): exactly where loss_on = x*/M meets loss_off = tau/2M.
  EXPECT_TRUE(ChooseSnapshotInterval(0.05, 1000, 30).on);
  const SnapshotChoice off = ChooseSnapshotInterval(0.05, 1000, 20);
  EXPECT_FALSE(off.on);
  EXPECT_GE(off.loss_on, off.loss_off);
  EXPECT_EQ(SnapshotPeriodSteps(off, 0.25, 1000), 0);
}

TEST(ChooseSnapshotInterval, EdgeCases) {
  // A free copy: every step, whatever the failures.
  auto free = ChooseSnapshotInterval(0, 1e9, 10);
  EXPECT_TRUE(free.on);
  EXPECT_EQ(SnapshotPeriodSteps(free, 0.1, 100), 1);
  EXPECT_TRUE(ChooseSnapshotInterval(std::nan(""), 10, 10).on);
  // No disk checkpoint: the tier is all there is.
  EXPECT_TRUE(ChooseSnapshotInterval(0.5, 1e6, 0).on);
  EXPECT_TRUE(ChooseSnapshotInterval(0.5, 1e6, kInf).on);
  EXPECT_TRUE(ChooseSnapshotInterval(0.5, 1e6, std::nan("")).on);
  // No failures expected (M infinite) and a copy that costs: off beside a disk tier.
  EXPECT_FALSE(ChooseSnapshotInterval(0.5, kInf, 100).on);
  EXPECT_FALSE(ChooseSnapshotInterval(0.5, -1, 100).on);
  // The period is clamped to [1, max_steps]; a step time of 0 gives 1.
  EXPECT_EQ(SnapshotPeriodSteps(ChooseSnapshotInterval(1, 1e6, kInf), 0.01, 500), 500);
  EXPECT_EQ(SnapshotPeriodSteps(ChooseSnapshotInterval(1e-6, 1, kInf), 1, 500), 1);
  EXPECT_EQ(SnapshotPeriodSteps(ChooseSnapshotInterval(1, 10, kInf), 0, 500), 1);
}

// Feeds `n` steps alternating with and without a copy, as the calibration period makes them.
std::optional<SnapshotPeriodChange> Alternate(SnapshotPeriodTuner* t, int n, double with, double without,
                                              double elapsed, int64_t disk) {
  std::optional<SnapshotPeriodChange> last;
  for (int i = 0; i < n; ++i)
    if (auto c = t->OnStep(i % 2 ? with : without, i % 2 == 1, elapsed, disk)) last = c;
  return last;
}

TEST(SnapshotPeriodTuner, CalibratesAtPeriodTwoThenChooses) {
  SnapshotPeriodTuner t(100, 1000);
  EXPECT_EQ(t.period(), -1);
  auto c = t.OnGenerationStart(4, 0, 0, 50);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->to, SnapshotPeriodTuner::kCalibrationPeriod);
  EXPECT_EQ(c->reason, "calibrating");
  EXPECT_FALSE(t.measured());
  // 11 steps: 5 pairs (a step without a copy, then one with): not measured yet.
  EXPECT_FALSE(Alternate(&t, 11, 0.30, 0.25, 10, 50).has_value());
  EXPECT_FALSE(t.measured());
  // The twelfth (the sixth pair) ends the calibration.
  c = t.OnStep(0.30, true, 10, 50);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->reason, "copy_measured");
  EXPECT_NEAR(c->copy_seconds, 0.05, 1e-12);
  EXPECT_NEAR(c->step_seconds, 0.25, 1e-12);
  EXPECT_NEAR(c->mtti_seconds, 110, 1e-12);            // (prior 100 + 10 s) / 1
  EXPECT_NEAR(c->disk_interval_seconds, 12.5, 1e-12);  // 50 steps of 0.25 s
  // x* = sqrt(2 * 0.05 * 110) = 3.32 s < 6.25: on, 13 steps.
  EXPECT_EQ(c->from, 2);
  EXPECT_EQ(c->to, 13);
  EXPECT_EQ(t.period(), 13);
  // More steps of the same generation change nothing (no flicker).
  EXPECT_FALSE(Alternate(&t, 20, 0.40, 0.25, 20, 50).has_value());
}

TEST(SnapshotPeriodTuner, FailuresTurnItOnAndTheirAbsenceOff) {
  SnapshotPeriodTuner t(86400, 1000);  // a failure a day assumed
  (void)t.OnGenerationStart(4, 0, 0, 50);
  auto c = Alternate(&t, 12, 0.30, 0.25, 60, 50);
  ASSERT_TRUE(c.has_value());
  // x* = sqrt(2 * 0.05 * 86460) = 93 s, far above half of 12.5 s: off.
  EXPECT_EQ(c->to, 0);
  // Twenty failures in 200 s: M = (86400 + 200) / 21 = 4124 s: still off (x* = 20 s).
  EXPECT_FALSE(t.OnGenerationStart(4, 20, 200, 50).has_value());
  // Four hundred failures in 2000 s: M = 220 s, x* = 4.7 s < 6.25: on (19 steps).
  c = t.OnGenerationStart(4, 400, 2000, 50);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->reason, "generation_start");
  EXPECT_EQ(c->from, 0);
  EXPECT_EQ(c->to, 19);
  EXPECT_EQ(c->failures, 400);
  // A longer disk interval makes the tier worth more, not less.
  EXPECT_FALSE(t.OnGenerationStart(4, 400, 2000, 500).has_value());
}

TEST(SnapshotPeriodTuner, ANewWorldSizeIsCalibratedAgain) {
  SnapshotPeriodTuner t(100, 1000);
  (void)t.OnGenerationStart(4, 0, 0, 50);
  (void)Alternate(&t, 12, 0.30, 0.25, 10, 50);
  ASSERT_TRUE(t.measured());
  auto c = t.OnGenerationStart(3, 1, 20, 50);  // a rank lost: other step times
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->to, SnapshotPeriodTuner::kCalibrationPeriod);
  EXPECT_FALSE(t.measured());
  // The same world again keeps what was measured.
  (void)Alternate(&t, 12, 0.40, 0.30, 30, 50);
  ASSERT_TRUE(t.measured());
  c = t.OnGenerationStart(3, 2, 40, 50);
  ASSERT_TRUE(c.has_value());  // more failures: a shorter period
  EXPECT_EQ(c->reason, "generation_start");
  EXPECT_TRUE(t.measured());
}

TEST(SnapshotPeriodTuner, ACopysCostIsTheStepAgainstTheOneBeforeSoASlowStretchCancels) {
  SnapshotPeriodTuner t(100, 1000);
  (void)t.OnGenerationStart(4, 0, 0, 50);
  // The machine slows down halfway (a replacement worker starting on the same cores):
  // every step takes 1 s more from then on. Medians of each kind apart would see a copy
  // of 0.55 s; the pairs see 0.05 s.
  std::optional<SnapshotPeriodChange> c;
  for (int i = 0; i < 12; ++i) {
    const double slow = i >= 6 ? 1.0 : 0.0;
    if (auto x = t.OnStep((i % 2 ? 0.30 : 0.25) + slow, i % 2 == 1, 10, 50)) c = x;
  }
  ASSERT_TRUE(c.has_value());
  EXPECT_NEAR(c->copy_seconds, 0.05, 1e-12);
}

TEST(SnapshotPeriodTuner, ReevaluatesOncePerGenerationAndIgnoresBadTimes) {
  SnapshotPeriodTuner t(100, 1000);
  (void)t.OnGenerationStart(4, 0, 0, 50);
  (void)Alternate(&t, 12, 0.30, 0.25, 10, 50);
  const int64_t before = t.period();
  (void)t.OnGenerationStart(4, 0, 10, 50);
  // NaN, negative and infinite times are not samples.
  EXPECT_FALSE(t.OnStep(std::nan(""), true, 11, 50).has_value());
  EXPECT_FALSE(t.OnStep(-1, false, 11, 50).has_value());
  EXPECT_FALSE(t.OnStep(kInf, true, 11, 50).has_value());
  // A run of steps with a copy and none without pairs with nothing.
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(t.OnStep(1.25, true, 12, 50).has_value());
  // The copy got dearer: after kMinSamples new pairs the period is evaluated again, once
  // (the window then holds 6 old pairs of 0.05 s and 6 new of 1 s: the median is 0.525 s).
  std::optional<SnapshotPeriodChange> c;
  for (int i = 0; i < 40 && !c; ++i) c = t.OnStep(i % 2 ? 1.25 : 0.25, i % 2 == 1, 12, 50);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->reason, "copy_measured");
  EXPECT_NEAR(c->copy_seconds, 0.525, 1e-12);
  EXPECT_NE(c->to, before);
  for (int i = 0; i < 40; ++i) EXPECT_FALSE(t.OnStep(2.0, true, 13, 50).has_value());
}

}  // namespace
}  // namespace elastrain
