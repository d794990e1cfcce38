// Checkpoint intervals (cost/interval.h): Young's and Daly's optima against values
// worked by hand (docs/cost.md), Daly's expected wall time, and the
// checkpoint_period=auto rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "cost/interval.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

TEST(CostIntervalTest, DalyOneDayMttiFiveMinuteCheckpointIs117Minutes) {
  // sqrt(2*300*86400) = 7200; x = 300/172800; 7200*(1 + sqrt(x)/3 + x/9) - 300 = 7001.4 s.
  EXPECT_NEAR(DalyInterval(300, 86400), 7001.4, 0.1);
  EXPECT_NEAR(DalyInterval(300, 86400) / 60, 117, 1);
  EXPECT_DOUBLE_EQ(YoungInterval(300, 86400), 7200);
}

TEST(CostIntervalTest, DalySixHourMttiIs57Minutes) {
  // sqrt(2*300*21600) = 3600; 3600*(1 + 1/12 + 1/144/... ) - 300 = 3402.8 s.
  EXPECT_NEAR(DalyInterval(300, 6 * 3600) / 60, 56.7, 0.05);
  EXPECT_NEAR(DalyInterval(300, 6 * 3600) / 60, 57, 0.5);
}

TEST(CostIntervalTest, DalyFifteenMinuteMttiIs9Point1MinutesWhateverTheRestart) {
  EXPECT_NEAR(DalyInterval(300, 900) / 60, 9.14, 0.01);
  // The optimum does not depend on R, but the expected time does: restarts of 10
  // minutes at an MTTI of 15 minutes multiply it by e^(600/900).
  const double t0 = DalyExpectedWallTime(3600, DalyInterval(300, 900), 300, 900, 0);
  const double t10 = DalyExpectedWallTime(3600, DalyInterval(300, 900), 300, 900, 600);
  EXPECT_NEAR(t10 / t0, std::exp(600.0 / 900.0), 1e-12);
}

TEST(CostIntervalTest, CheckpointLongerThanTwoMttiSavesEveryMtti) {
  EXPECT_DOUBLE_EQ(DalyInterval(2000, 900), 900);
  EXPECT_DOUBLE_EQ(DalyInterval(1800, 900), 900);  // the boundary delta = 2M
}

TEST(CostIntervalTest, ExpectedWallTimeWithRareFailuresIsWorkPlusCheckpoints) {
  // M >> tau: T_w -> T_s (tau + delta) / tau.
  const double t = DalyExpectedWallTime(36000, 3600, 60, 1e12, 100);
  EXPECT_NEAR(t, 36000 * 3660.0 / 3600.0, 1e-3);
}

TEST(CostIntervalTest, DalyIntervalMinimisesExpectedWallTime) {
  const double d = 120, m = 4 * 3600, r = 300, w = 100 * 3600;
  const double tau = DalyInterval(d, m);
  const double best = DalyExpectedWallTime(w, tau, d, m, r);
  for (double f : {0.5, 0.8, 0.95, 1.05, 1.25, 2.0}) EXPECT_LT(best, DalyExpectedWallTime(w, f * tau, d, m, r)) << f;
  // Daly's higher-order estimate beats Young's first-order one (by a little).
  EXPECT_LE(best, DalyExpectedWallTime(w, YoungInterval(d, m), d, m, r));
}

TEST(CostIntervalTest, ExpectedWallTimeOverflowIsInfinite) {
  EXPECT_TRUE(std::isinf(DalyExpectedWallTime(3600, 1e6, 300, 10, 0)));
}

TEST(CostIntervalTest, BadInputsNameTheFlag) {
  EXPECT_THAT(CheckIntervalInputs(0, 100, 0).message(), HasSubstr("--checkpoint-seconds=0: expected a number > 0"));
  EXPECT_THAT(CheckIntervalInputs(10, -1, 0).message(), HasSubstr("--mtti-seconds=-1"));
  EXPECT_THAT(CheckIntervalInputs(10, 100, -5).message(), HasSubstr("--restart-seconds=-5: expected a number >= 0"));
  EXPECT_TRUE(CheckIntervalInputs(10, 100, 0).ok());
}

TEST(CostIntervalTest, AutoPeriodWithNoHistoryIsDalyAtThePrior) {
  // 20 s stall, 2 s steps, prior MTTI 1 day: Daly(20, 86400) = 1839.4 s -> 920 steps.
  const double tau = DalyInterval(20, 86400);
  EXPECT_EQ(AutoCheckpointPeriodSteps(20, 2, 0, 0, 86400, 1, 100000), static_cast<int64_t>(std::round(tau / 2)));
}

TEST(CostIntervalTest, AutoPeriodShortensWithMoreFailures) {
  int64_t last = INT64_MAX;
  for (int failures : {0, 1, 3, 10, 30}) {
    const int64_t p = AutoCheckpointPeriodSteps(20, 1, failures, 3 * 3600, 86400, 1, 1000000);
    EXPECT_LT(p, last) << failures;
    last = p;
  }
  // The estimate is (prior + elapsed) / (1 + failures): 3 failures in 3 h of a 1-day prior.
  EXPECT_EQ(AutoCheckpointPeriodSteps(20, 1, 3, 3 * 3600, 86400, 1, 1000000),
            static_cast<int64_t>(std::round(DalyInterval(20, (86400.0 + 3 * 3600) / 4))));
}

TEST(CostIntervalTest, AutoPeriodLengthensWithALargerStall) {
  int64_t last = 0;
  for (double stall : {1.0, 5.0, 20.0, 120.0}) {
    const int64_t p = AutoCheckpointPeriodSteps(stall, 1, 2, 7200, 86400, 1, 1000000);
    EXPECT_GT(p, last) << stall;
    last = p;
  }
}

TEST(CostIntervalTest, AutoPeriodIsClampedAndSafeOnUnknownInputs) {
  EXPECT_EQ(AutoCheckpointPeriodSteps(20, 2, 0, 0, 86400, 10, 50), 50);   // 920 clamped down
  EXPECT_EQ(AutoCheckpointPeriodSteps(0.01, 60, 100, 0, 600, 10, 50), 10);  // ~0 clamped up
  EXPECT_EQ(AutoCheckpointPeriodSteps(20, 0, 0, 0, 86400, 7, 50), 7);     // no step time yet
  EXPECT_EQ(AutoCheckpointPeriodSteps(NAN, 2, 0, 0, 86400, 7, 50), 7);
  EXPECT_EQ(AutoCheckpointPeriodSteps(20, 2, 0, 0, 0, 7, 50), 7);         // no prior
  EXPECT_EQ(AutoCheckpointPeriodSteps(20, 2, 0, 0, 86400, 0, 0), 1);      // min < 1 counts as 1
}


TEST(CostIntervalTest, RamTierPriorIsTheUncoveredMtti) {
  // No RAM tier (fraction 1): the old estimate, bit for bit.
  EXPECT_EQ(EstimatedMttiSeconds(3, 3600, 86400, 1.0), EstimatedMttiSeconds(3, 3600, 86400));
  // With it: one pseudo-failure at prior / 0.1 = 10 days; uncovered failures still pull it down.
  EXPECT_DOUBLE_EQ(EstimatedMttiSeconds(0, 0, 86400, kRamTierUncoveredFraction), 864000);
  EXPECT_DOUBLE_EQ(EstimatedMttiSeconds(2, 7200, 86400, 0.1), (864000.0 + 7200) / 3);
  // A fraction that describes nothing gives no credit.
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) EXPECT_DOUBLE_EQ(EstimatedMttiSeconds(0, 0, 86400, bad), 86400) << bad;
  // Daly at the 10-day uncovered MTTI: sqrt(10) ~ 3.1x the period of the disk-only job.
  const int64_t disk_only = AutoCheckpointPeriodSteps(20, 2, 0, 0, 86400, 1, 1000000);
  const int64_t tiered = AutoCheckpointPeriodSteps(20, 2, 0, 0, 86400, 1, 1000000, kRamTierUncoveredFraction);
  EXPECT_EQ(tiered, static_cast<int64_t>(std::round(DalyInterval(20, 864000) / 2)));
  EXPECT_NEAR(static_cast<double>(tiered) / disk_only, std::sqrt(10.0), 0.02);
}

TEST(CostIntervalTest, UncoveredMttiIsMOverOneMinusCoverage) {
  EXPECT_DOUBLE_EQ(UncoveredMttiSeconds(3600, 0), 3600);
  EXPECT_DOUBLE_EQ(UncoveredMttiSeconds(3600, 0.9), 36000);
  EXPECT_TRUE(std::isinf(UncoveredMttiSeconds(3600, 1)));
  EXPECT_DOUBLE_EQ(UncoveredMttiSeconds(3600, NAN), 3600);
}

TEST(CostIntervalTest, RamTierWallTimeIsDalyWithoutCoverageAndLowerWithIt) {
  const double w = 100 * 3600, d = 60, m = 3 * 3600, r = 900;
  const double tau = DalyInterval(d, m);
  RamTierCost off;
  EXPECT_EQ(RamTierExpectedWallTime(w, tau, d, m, r, off), DalyExpectedWallTime(w, tau, d, m, r));
  // 90% covered, a 10 s snapshot period, 200 s back from peers: the worked form.
  const RamTierCost on{0.9, 10, 200};
  const double mu = m / 0.1, tau_u = DalyInterval(d, mu);
  const double f = 1 + 0.9 * std::expm1(200 / m) + 0.9 * 10 / (2 * m);
  const double expected = mu * std::exp(r / mu) * std::expm1(f * (tau_u + d) / mu) * w / tau_u;
  EXPECT_NEAR(RamTierExpectedWallTime(w, tau_u, d, m, r, on) / expected, 1, 1e-12);
  EXPECT_LT(expected, DalyExpectedWallTime(w, tau, d, m, r));
  // At the uncovered rate the longer disk interval is the better one.
  EXPECT_LT(RamTierExpectedWallTime(w, tau_u, d, m, r, on), RamTierExpectedWallTime(w, tau, d, m, r, on));
  // Everything covered: no disk restarts, only the saves, and Daly's restart factor e^{R_c/M}.
  EXPECT_DOUBLE_EQ(RamTierExpectedWallTime(w, 3600, d, m, r, {1, 0, 0}), w * 3660 / 3600);
  EXPECT_NEAR(RamTierExpectedWallTime(w, 3600, d, m, r, {1, 0, m}), w * 3660 / 3600 * std::exp(1.0), 1e-6);
  EXPECT_TRUE(std::isinf(RamTierExpectedWallTime(w, tau, d, m, r, {0.9, 0, 1000 * m})));
}

}  // namespace
}  // namespace elastrain
