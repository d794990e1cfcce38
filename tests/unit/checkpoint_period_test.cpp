// checkpoint_period=auto (train/checkpoint_period.h): when the chief's proposed period
// changes, and to what.
#include <gtest/gtest.h>

#include <cmath>

#include "cost/interval.h"
#include "train/checkpoint_period.h"

namespace elastrain {
namespace {

TEST(CheckpointPeriodTuner, StartsAtTheMinimumUntilASaveIsMeasured) {
  CheckpointPeriodTuner t(86400, 5, 1000);
  EXPECT_EQ(t.period(), 0);
  auto c = t.OnGenerationStart(0, 0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->from, 0);
  EXPECT_EQ(c->to, 5);
  EXPECT_EQ(c->reason, "generation_start");
  EXPECT_DOUBLE_EQ(c->mtti_seconds, 86400);
  EXPECT_EQ(c->stall_seconds, 0);
  EXPECT_EQ(t.period(), 5);
}

TEST(CheckpointPeriodTuner, FirstSaveOfAGenerationSetsThePeriod) {
  CheckpointPeriodTuner t(86400, 5, 100000);
  (void)t.OnGenerationStart(0, 0);
  auto c = t.OnSaveMeasured(2.0, 0.5, 100);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->from, 5);
  EXPECT_EQ(c->to, AutoCheckpointPeriodSteps(2.0, 0.5, 0, 100, 86400, 5, 100000));
  EXPECT_EQ(c->to, static_cast<int64_t>(std::round(DalyInterval(2.0, 86500) / 0.5)));
  EXPECT_EQ(c->reason, "save_measured");
  EXPECT_DOUBLE_EQ(c->mtti_seconds, 86500);
  EXPECT_DOUBLE_EQ(c->stall_seconds, 2.0);
  EXPECT_DOUBLE_EQ(c->step_seconds, 0.5);
  // Later saves of the same generation do not move it (no flicker from noise).
  EXPECT_FALSE(t.OnSaveMeasured(3.0, 0.4, 200).has_value());
  EXPECT_EQ(t.period(), c->to);
}

TEST(CheckpointPeriodTuner, EachFailureShortensThePeriodAtTheNextGeneration) {
  // Failures 10 s apart against a 60 s prior: M = 60, 70/2, 80/3, 90/4.
  CheckpointPeriodTuner t(60, 1, 100000);
  (void)t.OnGenerationStart(0, 0);
  auto first = t.OnSaveMeasured(0.05, 0.01, 1);
  ASSERT_TRUE(first.has_value());
  int64_t last = first->to;
  for (int f = 1; f <= 3; ++f) {
    auto c = t.OnGenerationStart(f, 10.0 * f);
    ASSERT_TRUE(c.has_value()) << f;
    EXPECT_EQ(c->from, last);
    EXPECT_LT(c->to, last) << f;
    EXPECT_EQ(c->failures, f);
    EXPECT_DOUBLE_EQ(c->mtti_seconds, (60 + 10.0 * f) / (1 + f));
    EXPECT_EQ(c->reason, "generation_start");
    last = c->to;
    // The generation's first save is taken again; the same measurements change nothing.
    EXPECT_FALSE(t.OnSaveMeasured(0.05, 0.01, 10.0 * f).has_value()) << f;
  }
}

TEST(CheckpointPeriodTuner, NoChangeNoEvent) {
  CheckpointPeriodTuner t(86400, 10, 10);  // min == max: the period is fixed
  ASSERT_TRUE(t.OnGenerationStart(0, 0).has_value());
  EXPECT_FALSE(t.OnSaveMeasured(1, 0.1, 5).has_value());
  EXPECT_FALSE(t.OnGenerationStart(3, 50).has_value());
  EXPECT_EQ(t.period(), 10);
}

TEST(CheckpointPeriodTuner, EstimatedMttiIsThePosteriorMean) {
  EXPECT_DOUBLE_EQ(EstimatedMttiSeconds(0, 0, 86400), 86400);
  EXPECT_DOUBLE_EQ(EstimatedMttiSeconds(3, 3600, 86400), (86400.0 + 3600) / 4);
  EXPECT_DOUBLE_EQ(EstimatedMttiSeconds(-1, -5, 100), 100);
  EXPECT_DOUBLE_EQ(EstimatedMttiSeconds(1, NAN, 100), 50);
}

}  // namespace
}  // namespace elastrain
