// checkpoint_period=auto (cost/checkpoint_period.h): when the chief's proposed period
// changes, and to what.
#include <gtest/gtest.h>

#include <cmath>

#include "cost/interval.h"
#include "cost/checkpoint_period.h"

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


TEST(CheckpointPeriodTuner, CoveredFailuresDoNotShortenTheDiskPeriodWithTheRamTier) {
  // Same measurements, 4 failures in 2 h against a 1-day prior, all covered by the RAM tier.
  CheckpointPeriodTuner disk_only(86400, 1, 10000000), tiered(86400, 1, 10000000, /*ram_tier=*/true);
  for (CheckpointPeriodTuner* t : {&disk_only, &tiered}) {
    (void)t->OnGenerationStart(0, 0, 0);
    (void)t->OnSaveMeasured(20, 1, 60);
  }
  auto a = disk_only.OnGenerationStart(4, 4, 7200);  // covered is ignored without the tier
  auto b = tiered.OnGenerationStart(4, 4, 7200);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->to, AutoCheckpointPeriodSteps(20, 1, 4, 7200, 86400, 1, 10000000));
  EXPECT_DOUBLE_EQ(a->mtti_seconds, (86400.0 + 7200) / 5);
  EXPECT_EQ(a->covered_failures, 0);
  // With the tier: no uncovered failure, so M_u = prior / 0.1 + elapsed.
  EXPECT_DOUBLE_EQ(b->mtti_seconds, 86400 / kRamTierUncoveredFraction + 7200);
  EXPECT_EQ(b->to, static_cast<int64_t>(std::round(DalyInterval(20, 86400 / kRamTierUncoveredFraction + 7200))));
  EXPECT_EQ(b->failures, 4);
  EXPECT_EQ(b->covered_failures, 4);
  EXPECT_GT(b->to, 3 * a->to);
}

TEST(CheckpointPeriodTuner, UncoveredFailuresPullTheTieredPeriodDownAsBefore) {
  CheckpointPeriodTuner t(86400, 1, 10000000, /*ram_tier=*/true);
  (void)t.OnGenerationStart(0, 0, 0);
  auto first = t.OnSaveMeasured(20, 1, 60);
  ASSERT_TRUE(first.has_value());
  int64_t last = first->to;
  // One more failure each generation, half of them covered: each uncovered one shortens it.
  for (int f = 1; f <= 4; ++f) {
    const int covered = f / 2, uncovered = f - covered;
    auto c = t.OnGenerationStart(f, covered, 3600.0 * f);
    ASSERT_TRUE(c.has_value()) << f;
    // A covered failure leaves the count alone: M_u grows with the elapsed time only.
    if (f % 2 == 0) EXPECT_GT(c->to, last) << f;
    else EXPECT_LT(c->to, last) << f;
    EXPECT_DOUBLE_EQ(c->mtti_seconds, (864000 + 3600.0 * f) / (1 + uncovered)) << f;
    last = c->to;
  }
  // The 2-argument form counts every failure as uncovered.
  auto all = t.OnGenerationStart(4, 5 * 3600.0);
  ASSERT_TRUE(all.has_value());
  EXPECT_DOUBLE_EQ(all->mtti_seconds, (864000 + 5 * 3600.0) / 5);
  EXPECT_LT(all->to, last);
}

TEST(CheckpointPeriodTuner, CoveredCountIsClampedToTheFailures) {
  CheckpointPeriodTuner t(86400, 1, 10000000, true);
  auto c = t.OnGenerationStart(2, 7, 0);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->covered_failures, 2);
  EXPECT_DOUBLE_EQ(c->mtti_seconds, 864000);
}

TEST(CheckpointPeriodTuner, TheRamTierCanBeTurnedOffAndOnByItsOwnAutoPeriod) {
  CheckpointPeriodTuner t(86400, 5, 100000, /*ram_tier=*/true);
  (void)t.OnGenerationStart(3, 2, 100);
  (void)t.OnSaveMeasured(2.0, 0.5, 100);
  const int64_t with_tier = t.period();
  // Off: every failure counts, and the prior is the job's MTTI, not the uncovered one.
  t.SetRamTier(false);
  EXPECT_FALSE(t.ram_tier());
  auto c = t.OnGenerationStart(3, 2, 100);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->to, AutoCheckpointPeriodSteps(2.0, 0.5, 3, 100, 86400, 5, 100000));
  EXPECT_LT(c->to, with_tier);
  EXPECT_EQ(c->covered_failures, 0);
  t.SetRamTier(true);
  c = t.OnGenerationStart(3, 2, 100);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->to, with_tier);
}

}  // namespace
}  // namespace elastrain
