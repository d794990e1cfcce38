// The cost planner (cost/planner.h) on llama3-8b and the shipped catalog: each formula
// of docs/cost.md on one candidate, memory rejection, ranking, deadline and budget, and
// the fall-back to on-demand when spot cannot make the deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "cost/catalog.h"
#include "cost/interval.h"
#include "cost/planner.h"
#include "cost/snapshot_period.h"
#include "model/flops.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

PlanRequest Llama8b() {
  PlanRequest r;
  r.model = ModelPreset("llama3-8b").value();
  r.seq_len = 8192;
  r.micro_batch = 1;
  r.remat_full = true;
  r.tokens = 1e11;
  r.max_hosts = 64;
  return r;
}

AcceleratorOffer Offer(const std::string& name) {
  const auto catalog = EmbeddedCatalog();
  for (const AcceleratorOffer& o : catalog.value())
    if (o.name == name) return o;
  ADD_FAILURE() << name;
  return {};
}

TEST(CostPlannerTest, OneCandidateFollowsTheDocumentedFormulas) {
  const PlanRequest r = Llama8b();
  const AcceleratorOffer v6e = Offer("gcp-tpu-v6e");
  bool fits = false;
  const PlanCandidate p = EvaluatePlan(r, v6e, Capacity::kSpot, 9, &fits);
  ASSERT_TRUE(fits);
  EXPECT_EQ(p.chips, 72);
  const double fpt = TrainingFlopsPerToken(r.model, 8192);
  EXPECT_DOUBLE_EQ(p.ideal_seconds, 1e11 * fpt / (72 * 918e12 * 0.4));
  const double n = static_cast<double>(r.model.NumParams());
  EXPECT_DOUBLE_EQ(p.checkpoint_bytes, 12 * n);
  EXPECT_DOUBLE_EQ(p.checkpoint_seconds, 12 * n / (9 * 1e9));
  EXPECT_DOUBLE_EQ(p.job_mtti_seconds, 24 * 3600.0 / 9);
  EXPECT_DOUBLE_EQ(p.recovery_seconds, 30 + 120 + p.checkpoint_seconds + 600);
  EXPECT_DOUBLE_EQ(p.interval_seconds, DalyInterval(p.checkpoint_seconds, p.job_mtti_seconds));
  EXPECT_DOUBLE_EQ(p.expected_seconds, DalyExpectedWallTime(p.ideal_seconds, p.interval_seconds, p.checkpoint_seconds,
                                                            p.job_mtti_seconds, p.recovery_seconds));
  EXPECT_DOUBLE_EQ(p.goodput, p.ideal_seconds / p.expected_seconds);
  EXPECT_GT(p.goodput, 0.5);
  EXPECT_LT(p.goodput, 1.0);
  EXPECT_DOUBLE_EQ(p.usd_per_hour, 72 * 0.648);
  EXPECT_DOUBLE_EQ(p.cost_usd, 72 * 0.648 * p.expected_seconds / 3600);
}

TEST(CostPlannerTest, MixBuysAQuarterOfTheHostsOnDemand) {
  const PlanRequest r = Llama8b();
  bool fits = false;
  const PlanCandidate p = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kMix, 10, &fits);
  EXPECT_EQ(p.on_demand_hosts, 3);  // ceil(0.25 * 10)
  EXPECT_DOUBLE_EQ(p.usd_per_hour, 8 * (7 * 0.648 + 3 * 2.70));
  EXPECT_DOUBLE_EQ(p.job_mtti_seconds, 1 / (7 / (24 * 3600.0) + 3 / (264 * 24 * 3600.0)));
}

TEST(CostPlannerTest, OnDemandHasBetterGoodputThanSpotAtTheSameSize) {
  const PlanRequest r = Llama8b();
  bool fits = false;
  const PlanCandidate spot = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kSpot, 16, &fits);
  const PlanCandidate od = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kOnDemand, 16, &fits);
  EXPECT_GT(od.goodput, spot.goodput);
  EXPECT_GT(od.cost_usd, spot.cost_usd);  // but costs ~4x per hour
}

TEST(CostPlannerTest, TooFewChipsDoNotFitAndAnOfferThatNeverFitsIsRejected) {
  PlanRequest r = Llama8b();
  bool fits = true;
  // 8.03B params x 16 B = 128 GB of state: one v5e host (8 x 16 GiB) cannot hold it.
  EvaluatePlan(r, Offer("gcp-tpu-v5e"), Capacity::kSpot, 1, &fits);
  EXPECT_FALSE(fits);
  r.max_hosts = 1;
  const PlanReport rep = EnumeratePlans(r, {Offer("gcp-tpu-v5e")});
  EXPECT_TRUE(rep.candidates.empty());
  ASSERT_EQ(rep.rejected.size(), 1u);
  EXPECT_THAT(rep.rejected[0], HasSubstr("gcp-tpu-v5e: does not fit"));
  EXPECT_THAT(rep.rejected[0], HasSubstr("has 16 GiB"));
}

TEST(CostPlannerTest, RankingIsByCostAmongPlansThatMeetTheDeadline) {
  PlanRequest r = Llama8b();
  r.deadline_seconds = 72 * 3600;
  const PlanReport rep = EnumeratePlans(r, EmbeddedCatalog().value());
  const auto ranked = RankPlans(rep.candidates);
  ASSERT_FALSE(ranked.empty());
  for (size_t i = 0; i < ranked.size(); ++i) {
    EXPECT_LE(ranked[i].expected_seconds, r.deadline_seconds);
    if (i) {
      EXPECT_LE(ranked[i - 1].cost_usd, ranked[i].cost_usd);
    }
  }
  // Nothing cheaper was left out: every candidate under the deadline costs at least the best.
  for (const PlanCandidate& p : rep.candidates)
    if (p.meets_deadline) {
      EXPECT_GE(p.cost_usd, ranked[0].cost_usd);
    }
  EXPECT_EQ(ranked[0].capacity, Capacity::kSpot);
  // A budget below the best plan's cost leaves nothing.
  r.budget_usd = ranked[0].cost_usd * 0.99;
  EXPECT_TRUE(RankPlans(EnumeratePlans(r, EmbeddedCatalog().value()).candidates).empty());
}

TEST(CostPlannerTest, FallsBackToOnDemandWhenSpotCannotMeetTheDeadline) {
  PlanRequest r = Llama8b();
  r.max_hosts = 32;
  const std::vector<AcceleratorOffer> v6e = {Offer("gcp-tpu-v6e")};
  double fastest_spot = INFINITY, fastest_od = INFINITY;
  for (const PlanCandidate& p : EnumeratePlans(r, v6e).candidates) {
    if (p.capacity == Capacity::kSpot) fastest_spot = std::min(fastest_spot, p.expected_seconds);
    if (p.capacity == Capacity::kOnDemand) fastest_od = std::min(fastest_od, p.expected_seconds);
  }
  ASSERT_LT(fastest_od, fastest_spot);
  r.deadline_seconds = (fastest_od + fastest_spot) / 2;
  const auto ranked = RankPlans(EnumeratePlans(r, v6e).candidates);
  ASSERT_FALSE(ranked.empty());
  EXPECT_NE(ranked[0].capacity, Capacity::kSpot);
  for (const PlanCandidate& p : ranked) EXPECT_NE(p.capacity, Capacity::kSpot);
}


// ---- The RAM tier ---------------------------------------------------------------------

TEST(CostPlannerTest, RamTierIsOffByDefaultAndChangesNothing) {
  const PlanRequest r = Llama8b();
  EXPECT_EQ(r.memory_snapshot_replicas, 0);
  bool fits = false;
  const PlanCandidate p = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kSpot, 9, &fits);
  EXPECT_EQ(p.ram_tier_coverage, 0);
  EXPECT_EQ(p.ram_tier_bytes_per_chip, 0);
  EXPECT_DOUBLE_EQ(p.interval_seconds, DalyInterval(p.checkpoint_seconds, p.job_mtti_seconds));
}

TEST(CostPlannerTest, RamTierFollowsTheDocumentedFormulas) {
  PlanRequest r = Llama8b();
  r.memory_snapshot_replicas = 1;
  r.memory_snapshot_period = 4;
  bool fits = false;
  const PlanCandidate off = EvaluatePlan(Llama8b(), Offer("gcp-tpu-v6e"), Capacity::kSpot, 9, &fits);
  const PlanCandidate p = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kSpot, 9, &fits);
  ASSERT_TRUE(fits);
  const double n = static_cast<double>(r.model.NumParams());
  // 9 hosts: every spot event (1, 2 or 4 hosts) spares one, so the requested 0.9 holds.
  EXPECT_DOUBLE_EQ(p.ram_tier_coverage, 0.9);
  EXPECT_DOUBLE_EQ(p.uncovered_mtti_seconds, p.job_mtti_seconds / (1 - 0.9));
  EXPECT_DOUBLE_EQ(p.interval_seconds, DalyInterval(p.checkpoint_seconds, p.uncovered_mtti_seconds));
  const double fpt = TrainingFlopsPerToken(r.model, 8192);
  EXPECT_DOUBLE_EQ(p.step_seconds, 8192 * fpt / (918e12 * 0.4));
  EXPECT_DOUBLE_EQ(p.snapshot_period_seconds, 4 * p.step_seconds);
  EXPECT_DOUBLE_EQ(p.peer_restore_seconds, 12 * n / (9 * 10e9));
  EXPECT_DOUBLE_EQ(p.peer_recovery_seconds, 30 + 120 + p.peer_restore_seconds + 600);
  EXPECT_DOUBLE_EQ(p.recovery_seconds, off.recovery_seconds);  // an uncovered one: as before
  const RamTierCost tier{0.9, p.snapshot_period_seconds, p.peer_recovery_seconds};
  EXPECT_DOUBLE_EQ(p.expected_seconds, RamTierExpectedWallTime(p.ideal_seconds, p.interval_seconds,
                                                               p.checkpoint_seconds, p.job_mtti_seconds,
                                                               p.recovery_seconds, tier));
  // (1 staging + 2 x 1 buffers) x 12 B x N / 72 ranks of host RAM per rank.
  EXPECT_DOUBLE_EQ(p.ram_tier_bytes_per_chip, 3 * 12 * n / 72);
  // The disk interval grows ~sqrt(10) x; the job finishes sooner and costs less.
  EXPECT_GT(p.interval_seconds, 3 * off.interval_seconds);
  EXPECT_LT(p.expected_seconds, off.expected_seconds);
  EXPECT_LT(p.cost_usd, off.cost_usd);
  EXPECT_GT(p.goodput, off.goodput);
  std::printf("v6e spot x9: disk only tau %.0f s, %.2f h, $%.0f; RAM tier tau %.0f s, %.2f h, $%.0f\n",
              off.interval_seconds, off.expected_seconds / 3600, off.cost_usd, p.interval_seconds,
              p.expected_seconds / 3600, p.cost_usd);
}

TEST(CostPlannerTest, AutoPeriodChoosesYoungsIntervalOrTurnsTheTierOff) {
  PlanRequest r = Llama8b();
  r.memory_snapshot_replicas = 1;
  r.memory_snapshot_period_auto = true;
  r.snapshot_copy_seconds = 0.05;
  bool fits = false;
  const PlanCandidate p = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kSpot, 9, &fits);
  ASSERT_TRUE(fits);
  const SnapshotChoice c = ChooseSnapshotInterval(0.05, p.job_mtti_seconds / 0.9,
                                                  DalyInterval(p.checkpoint_seconds, p.job_mtti_seconds));
  ASSERT_TRUE(c.on);
  EXPECT_EQ(p.snapshot_period_steps, SnapshotPeriodSteps(c, p.step_seconds, int64_t{1} << 40));
  EXPECT_GT(p.snapshot_period_steps, 1);
  EXPECT_DOUBLE_EQ(p.snapshot_period_seconds, p.snapshot_period_steps * p.step_seconds);
  // The copies stretch the work: the plan at period 1 with the same copy cost is slower.
  PlanRequest every = r;
  every.memory_snapshot_period_auto = false;
  every.memory_snapshot_period = 1;
  const PlanCandidate one = EvaluatePlan(every, Offer("gcp-tpu-v6e"), Capacity::kSpot, 9, &fits);
  EXPECT_LT(p.expected_seconds, one.expected_seconds);
  // A copy that costs minutes: off, and the plan is the disk-only plan exactly.
  r.snapshot_copy_seconds = 300;
  const PlanCandidate off = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kSpot, 9, &fits);
  const PlanCandidate disk = EvaluatePlan(Llama8b(), Offer("gcp-tpu-v6e"), Capacity::kSpot, 9, &fits);
  EXPECT_EQ(off.snapshot_period_steps, 0);
  EXPECT_EQ(off.ram_tier_coverage, 0);
  EXPECT_DOUBLE_EQ(off.interval_seconds, disk.interval_seconds);
  EXPECT_DOUBLE_EQ(off.expected_seconds, disk.expected_seconds);
}

TEST(CostPlannerTest, RamTierCoversNothingOnOneHostAndOnlyWhatSparesAHostOnFew) {
  PlanRequest r = Llama8b();
  r.memory_snapshot_replicas = 2;
  r.model = ModelPreset("tiny").value();
  bool fits = false;
  const PlanCandidate one = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kSpot, 1, &fits);
  EXPECT_EQ(one.ram_tier_coverage, 0);  // every event takes the only host
  EXPECT_DOUBLE_EQ(one.interval_seconds, DalyInterval(one.checkpoint_seconds, one.job_mtti_seconds));
  const PlanCandidate two = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kSpot, 2, &fits);
  EXPECT_DOUBLE_EQ(two.ram_tier_coverage, 0.7);  // spot: 1 host 70%, 2 or 4 take both
  const PlanCandidate od = EvaluatePlan(r, Offer("gcp-tpu-v6e"), Capacity::kOnDemand, 2, &fits);
  EXPECT_DOUBLE_EQ(od.ram_tier_coverage, 0.9);  // on demand loses one host at a time
  EXPECT_DOUBLE_EQ(two.ram_tier_bytes_per_chip, 5 * two.checkpoint_bytes / 16);
}

}  // namespace
}  // namespace elastrain
