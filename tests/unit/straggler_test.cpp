// The straggler rule (elastic/straggler.h) and the exclusion's arithmetic, without
// processes: hand-built step anatomy fed window by window as the agents would report it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "elastic/straggler.h"

namespace elastrain {
namespace {

// Four ranks; `slow` (rank) computes `factor` x as long as the others' 0.4 s. Every rank's
// window ends at `until`.
std::vector<RankTiming> Ranks(int64_t until, int slow = -1, double factor = 1, int n = 4) {
  std::vector<RankTiming> v;
  for (int r = 0; r < n; ++r) {
    const double compute = r == slow ? 0.4 * factor : 0.4;
    const std::string id = std::to_string(r);
    v.push_back({r, std::string("a1-w").append(id), r == slow ? std::string("h-slow") : std::string("h").append(id), compute,
                 r == slow ? 0.01 : 0.4 * factor - 0.4 + 0.01, kAnatomyWindow, until});
  }
  return v;
}

// The observation's time at `step`: a second per step (the persistence in time, 3 s,
// holds whenever the persistence in steps does).
double Now(int64_t step) { return 1000 + static_cast<double>(step); }

StragglerSettings Defaults() { return StragglerSettings{1.35, 10, StragglerPolicy::kAlert}; }

TEST(Straggler, NamedOnlyAfterStayingSlowForThePersistence) {
  std::map<std::string, StragglerTrack> tracks;
  // Slow from the window ending at step 20 (window 16..20): named when step 25 is judged.
  for (int64_t step = 20; step < 25; ++step) {
    const StragglerJudgement j = JudgeStragglers(Ranks(step, 2, 2.0), 3, step, Now(step), Defaults(), &tracks);
    EXPECT_TRUE(j.detected.empty()) << "step " << step;
  }
  const StragglerJudgement j = JudgeStragglers(Ranks(25, 2, 2.0), 3, 25, Now(25), Defaults(), &tracks);
  ASSERT_EQ(j.detected.size(), 1u);
  const StragglerDetectedEvent& e = j.detected[0];
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.host, "h-slow");
  EXPECT_EQ(e.worker, "a1-w2");
  EXPECT_DOUBLE_EQ(e.slowdown, 2.0);
  EXPECT_DOUBLE_EQ(e.median_compute_seconds, 0.4);
  EXPECT_EQ(e.since_step, 16);
  EXPECT_EQ(e.generation, 3);
  EXPECT_EQ(e.policy, "alert");
  EXPECT_TRUE(tracks.at("a1-w2").detected);
  // Once: the next judgements name nobody again.
  EXPECT_TRUE(JudgeStragglers(Ranks(26, 2, 2.0), 3, 26, Now(26), Defaults(), &tracks).detected.empty());
}

TEST(Straggler, ABriefSlowPatchIsNoStraggler) {
  std::map<std::string, StragglerTrack> tracks;
  for (int64_t step = 20; step < 40; ++step) {
    // Slow for 3 windows in every 5: never slow for 10 consecutive steps.
    const bool slow = step % 5 < 3;
    const StragglerJudgement j = JudgeStragglers(Ranks(step, 1, slow ? 1.8 : 1.0), 0, step, Now(step), Defaults(), &tracks);
    EXPECT_TRUE(j.detected.empty()) << "step " << step;
  }
}

TEST(Straggler, TenQuickStepsAreNotEnoughTimeToBeNamed) {
  // Steps of a few milliseconds (a `tiny` job; the rank 25 ms behind, above the excess
  // floor): ten of them pass in a fraction of a second, a busy scheduler's moment. Named
  // only once it has stayed slow for kMinStragglerPersistenceSeconds as well.
  std::map<std::string, StragglerTrack> tracks;
  auto ranks = [](int64_t until) {
    std::vector<RankTiming> v = Ranks(until, 1, 1);
    for (RankTiming& t : v) t.compute_seconds = t.rank == 1 ? 0.030 : 0.005;
    return v;
  };
  const double t0 = 1000, per_step = 0.04;
  int64_t step = 20;
  for (; t0 + per_step * static_cast<double>(step - 20) < t0 + kMinStragglerPersistenceSeconds; ++step)
    ASSERT_TRUE(JudgeStragglers(ranks(step), 0, step, t0 + per_step * static_cast<double>(step - 20), Defaults(), &tracks)
                    .detected.empty())
        << "step " << step;
  EXPECT_GT(step - 20, 10) << "the time, not the step count, held it back";
  const StragglerJudgement j =
      JudgeStragglers(ranks(step), 0, step, t0 + per_step * static_cast<double>(step - 20), Defaults(), &tracks);
  ASSERT_EQ(j.detected.size(), 1u);
  EXPECT_EQ(j.detected[0].since_step, 16);
}

TEST(Straggler, BelowTheThresholdIsNotSlow) {
  std::map<std::string, StragglerTrack> tracks;
  for (int64_t step = 10; step < 60; ++step)
    EXPECT_TRUE(JudgeStragglers(Ranks(step, 0, 1.3), 0, step, Now(step), Defaults(), &tracks).detected.empty());
}

TEST(Straggler, ClearedWithHysteresis) {
  std::map<std::string, StragglerTrack> tracks;
  int64_t step = 10;
  for (; step <= 20; ++step) JudgeStragglers(Ranks(step, 3, 2.0), 0, step, Now(step), Defaults(), &tracks);
  ASSERT_TRUE(tracks.at("a1-w3").detected);
  // 1.25x: below the threshold but above the midpoint 1.175: still named.
  ++step;
  StragglerJudgement j = JudgeStragglers(Ranks(step, 3, 1.25), 0, step, Now(step), Defaults(), &tracks);
  EXPECT_TRUE(j.cleared.empty());
  ++step;
  j = JudgeStragglers(Ranks(step, 3, 1.1), 0, step, Now(step), Defaults(), &tracks);
  ASSERT_EQ(j.cleared.size(), 1u);
  EXPECT_EQ(j.cleared[0].rank, 3);
  EXPECT_EQ(j.cleared[0].reason, "back to pace");
  EXPECT_FALSE(tracks.at("a1-w3").detected);
}

TEST(Straggler, MillisecondsOfComputeAreNoiseWhateverTheRatio) {
  // tiny on a shared machine: 1 ms of compute per step, one rank at 1.7x by scheduling.
  std::map<std::string, StragglerTrack> tracks;
  for (int64_t step = 10; step < 60; ++step) {
    std::vector<RankTiming> v = Ranks(step, 2, 1.7);
    for (RankTiming& t : v) t.compute_seconds /= 400;  // 1 ms and 1.7 ms
    EXPECT_TRUE(JudgeStragglers(v, 0, step, Now(step), Defaults(), &tracks).detected.empty()) << step;
  }
}

TEST(Straggler, NoNewStepNoNewJudgement) {
  // The controller decides many times per step: persistence counts steps, not calls.
  std::map<std::string, StragglerTrack> tracks;
  for (int call = 0; call < 100; ++call)
    EXPECT_TRUE(JudgeStragglers(Ranks(20, 1, 3.0), 0, 20, Now(20), Defaults(), &tracks).detected.empty());
}

TEST(Straggler, TwoRanksCompareWithEachOther) {
  std::map<std::string, StragglerTrack> tracks;
  std::vector<StragglerDetectedEvent> named;
  for (int64_t step = 5; step <= 30; ++step)
    for (const auto& e : JudgeStragglers(Ranks(step, 1, 2.0, 2), 0, step, Now(step), Defaults(), &tracks).detected)
      named.push_back(e);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].rank, 1) << "the fast one is never named";
  EXPECT_EQ(named[0].step, 10) << "window 1..5 slow, then 10 steps of it";
}

TEST(Straggler, PartialWindowsAndOneRankAreNotJudged) {
  std::map<std::string, StragglerTrack> tracks;
  std::vector<RankTiming> v = Ranks(30, 1, 3.0);
  for (RankTiming& t : v) t.timed_steps = kAnatomyWindow - 1;  // a new generation's first steps
  for (int64_t step = 0; step < 30; ++step) EXPECT_TRUE(JudgeStragglers(v, 0, step, Now(step), Defaults(), &tracks).detected.empty());
  std::vector<RankTiming> one = {Ranks(30, 0, 3.0)[0]};
  EXPECT_TRUE(JudgeStragglers(one, 0, 30, Now(30), Defaults(), &tracks).detected.empty());
}

TEST(Straggler, ImplausibleFiguresAreRefusedWithAReason) {
  std::map<std::string, StragglerTrack> tracks;
  std::vector<RankTiming> v = Ranks(30, -1);
  v[1].compute_seconds = std::numeric_limits<double>::quiet_NaN();
  v[2].wait_seconds = -3;
  v[3].timed_steps = 1 << 30;
  v.push_back({4, "a1-w4", "h4", std::numeric_limits<double>::infinity(), 0, 5, 30});
  const StragglerJudgement j = JudgeStragglers(v, 0, 30, Now(30), Defaults(), &tracks);
  ASSERT_EQ(j.refused.size(), 4u);
  EXPECT_NE(j.refused[0].find("rank 1 (a1-w1)"), std::string::npos) << j.refused[0];
  EXPECT_NE(j.refused[2].find("timed_steps"), std::string::npos) << j.refused[2];
  EXPECT_TRUE(j.detected.empty());
}

TEST(Straggler, ANewGenerationStartsAfreshAndClearsTheNamed) {
  std::map<std::string, StragglerTrack> tracks;
  for (int64_t step = 10; step <= 20; ++step) JudgeStragglers(Ranks(step, 1, 2.0), 0, step, Now(step), Defaults(), &tracks);
  ASSERT_TRUE(tracks.at("a1-w1").detected);
  // Generation 1 without a1-w1: it is cleared as "generation ended", the others restart.
  std::vector<RankTiming> v = Ranks(25, -1);
  v.erase(v.begin() + 1);
  const StragglerJudgement j = JudgeStragglers(v, 1, 25, Now(25), Defaults(), &tracks);
  ASSERT_EQ(j.cleared.size(), 1u);
  EXPECT_EQ(j.cleared[0].worker, "a1-w1");
  EXPECT_EQ(j.cleared[0].reason, "generation ended");
  EXPECT_EQ(tracks.count("a1-w1"), 0u);
  for (const auto& [id, k] : tracks) EXPECT_EQ(k.generation, 1) << id;
}

TEST(StragglerExclusion, PaysWhenTheRemainingStepsOutweighTheReplan) {
  // 4 ranks, one at 2x: now ~0.81 s per step; without it 0.4 x 4/3 + 0.01 = 0.543 s.
  const std::vector<RankTiming> v = Ranks(30, 2, 2.0);
  ExclusionCase c = WeighExclusion(v, {2}, 1000, {4.0, "the last recovery"});
  EXPECT_NEAR(c.now_step_seconds, 0.81, 1e-9);
  EXPECT_NEAR(c.next_step_seconds, 0.4 * 4 / 3 + 0.01, 1e-9);
  EXPECT_NEAR(c.expected_gain_seconds, 1000 * (0.81 - (0.4 * 4 / 3 + 0.01)), 1e-6);
  EXPECT_EQ(c.replan_cost_seconds, 4.0);
  EXPECT_TRUE(c.pays) << c.reason;
  // A few steps left: the re-plan costs more than it saves.
  c = WeighExclusion(v, {2}, 10, {4.0, "the last recovery"});
  EXPECT_FALSE(c.pays);
  EXPECT_NE(c.reason.find("not more than"), std::string::npos) << c.reason;
  // Nothing measured yet: the assumed cost.
  c = WeighExclusion(v, {2}, 10, {});
  EXPECT_EQ(c.replan_cost_seconds, kDefaultReplanSeconds);
  EXPECT_NE(c.reason.find("assumed"), std::string::npos) << c.reason;
}

TEST(StragglerExclusion, ASpareInTheStragglersPlaceKeepsTheWorld) {
  // 4 ranks, one at 2x, a spare takes its place: 0.4 + 0.01 per step instead of 0.81.
  const ExclusionCase c = WeighExclusion(Ranks(30, 2, 2.0), {2}, 1000, {4.0, "the last recovery"}, 4);
  EXPECT_NEAR(c.next_step_seconds, 0.4 + 0.01, 1e-9);
  EXPECT_NE(c.reason.find("on 4 ranks"), std::string::npos) << c.reason;
  // More than the world now is never assumed.
  EXPECT_NEAR(WeighExclusion(Ranks(30, 2, 2.0), {2}, 1000, {4.0, "x"}, 8).next_step_seconds, 0.41, 1e-9);
}

TEST(StragglerExclusion, AThrottledStragglersFrozenAllReducesAreNotCommunication) {
  // CI's figures: rank 1 CPU-throttled (cgroup quota) at ~2.3x computes 0.080 s and is
  // frozen ~0.070 s inside its all-reduces (its "wait"); the others compute 0.035 s and
  // wait 0.075 s for it: 0.110 s a step. Its wait is not the communication: excluding it
  // leaves 0.035 x 4/3 + (0.110 - 0.080) = 0.077 s, and 256 steps pay a 4.3 s re-plan.
  std::vector<RankTiming> v = Ranks(30, -1);
  for (RankTiming& t : v) t.compute_seconds = 0.035, t.wait_seconds = 0.075;
  v[1].compute_seconds = 0.080;
  v[1].wait_seconds = 0.070;
  const ExclusionCase c = WeighExclusion(v, {1}, 256, {4.3, "the last recovery"});
  EXPECT_NEAR(c.now_step_seconds, 0.110, 1e-9);
  EXPECT_NEAR(c.next_step_seconds, 0.035 * 4 / 3 + 0.030, 1e-9);
  EXPECT_TRUE(c.pays) << c.reason;
}

TEST(StragglerExclusion, ASlightStragglerOnFewRanksDoesNotPay) {
  // 2 ranks, one at 1.4x: without it the other does twice the work, slower than now.
  const ExclusionCase c = WeighExclusion(Ranks(30, 1, 1.4, 2), {1}, 100000, {1, "the last recovery"});
  EXPECT_LT(c.expected_gain_seconds, 0);
  EXPECT_FALSE(c.pays);
}

}  // namespace
}  // namespace elastrain
