// The controller's decisions about gray failures (issue 32, elastic/policy.h): stragglers
// named and excluded from the step anatomy in the workers' records, and hangs diagnosed
// by the last collective each member entered. Pure: hand-built Observations through Decide.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "elastic/policy.h"
#include "policy_test_builders.h"

namespace elastrain {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::elastrain::policy_test;  // NOLINT: the builders are the tests' vocabulary

// Every member reports a full window ending at `step`; `slow` computes `factor` x longer.
void Anatomy(Cluster& c, const Plan& plan, int64_t step, int slow, double factor) {
  for (const PlanMember& m : plan.members) {
    WorkerRecord& r = c.W(m.worker).rec;
    r.step = step;
    r.last_step_time = r.last_progress = kT0 + static_cast<double>(step);  // as RunSteps' clock
    r.timed_steps = kAnatomyWindow;
    r.timed_until_step = step;
    r.compute_seconds = m.rank == slow ? 0.4 * factor : 0.4;
    r.wait_seconds = m.rank == slow ? 0.01 : 0.4 * factor - 0.4 + 0.01;
  }
}

JobSettings GraySettings(int min_workers, int max_workers, StragglerPolicy policy) {
  JobSettings s = Settings(min_workers, max_workers);
  s.steps = 1000;
  s.straggler.policy = policy;
  return s;
}

// Runs steps [from, to] of `plan` with rank `slow` at `factor`; the decisions' record
// carried along. Returns the decision of the last step.
Decision RunSteps(Cluster& c, const Plan& plan, JobRecord* rec, const JobSettings& s, int64_t from, int64_t to,
                  int slow, double factor, std::vector<std::string>* names = nullptr,
                  std::vector<std::string>* warnings = nullptr) {
  Decision d;
  for (int64_t step = from; step <= to; ++step) {
    Anatomy(c, plan, step, slow, factor);
    d = Decide(*rec, c.Obs(kT0 + static_cast<double>(step), plan), s);
    *rec = d.record;
    if (names)
      for (const std::string& n : EventNames(d)) names->push_back(n);
    if (warnings) warnings->insert(warnings->end(), d.warnings.begin(), d.warnings.end());
  }
  return d;
}

TEST(ElasticPolicyGray, AlertNamesTheSlowRankAndGoesOn) {
  Cluster c;
  for (int i = 0; i < 4; ++i) c.AddHost("a" + std::to_string(i), "h" + std::to_string(i), 1);
  const Plan plan = RunningPlan(c, 0, {"a0-w0", "a1-w0", "a2-w0", "a3-w0"}, 10, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  const JobSettings s = GraySettings(2, 4, StragglerPolicy::kAlert);
  std::vector<std::string> names;
  RunSteps(c, plan, &rec, s, 10, 40, 2, 2.0, &names);
  EXPECT_EQ(std::count(names.begin(), names.end(), "straggler_detected"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "host_excluded"), 0);
  EXPECT_TRUE(rec.stragglers.at("a2-w0").detected);
  EXPECT_EQ(rec.resize_requested_gen, -1) << "alert does not stop the generation";
  EXPECT_TRUE(rec.cooldown_until.empty());
  // Back to pace: cleared once.
  names.clear();
  RunSteps(c, plan, &rec, s, 41, 50, -1, 1.0, &names);
  EXPECT_EQ(std::count(names.begin(), names.end(), "straggler_cleared"), 1);
}

TEST(ElasticPolicyGray, NoStragglerOnEvenRanks) {
  Cluster c;
  c.AddHost("a1", "h1", 4);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1", "a1-w2", "a1-w3"}, 10, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  std::vector<std::string> names;
  RunSteps(c, plan, &rec, GraySettings(2, 4, StragglerPolicy::kExclude), 10, 200, -1, 1.0, &names);
  for (const std::string& n : names) EXPECT_TRUE(n == "generation_first_step") << n;
  EXPECT_EQ(rec.resize_requested_gen, -1);
}

TEST(ElasticPolicyGray, ExcludeCoolsTheHostDownAndPlansWithoutIt) {
  Cluster c;
  for (int i = 0; i < 4; ++i) c.AddHost("a" + std::to_string(i), "h" + std::to_string(i), 1);
  const Plan plan = RunningPlan(c, 0, {"a0-w0", "a1-w0", "a2-w0", "a3-w0"}, 10, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  rec.last_recovery_seconds = 2;
  const JobSettings s = GraySettings(2, 4, StragglerPolicy::kExclude);
  std::vector<std::string> names;
  RunSteps(c, plan, &rec, s, 10, 40, 1, 2.0, &names);
  ASSERT_EQ(std::count(names.begin(), names.end(), "host_excluded"), 1) << testing::PrintToString(names);
  EXPECT_EQ(rec.resize_requested_gen, 0);
  EXPECT_GT(rec.cooldown_until.at("h1"), kT0);
  EXPECT_TRUE(rec.excluded_at.count("h1"));
  // The generation stops at its boundary (as for a resize); the next one leaves h1 out.
  for (const char* id : {"a0-w0", "a1-w0", "a2-w0", "a3-w0"}) MarkIdle(c, id, "stopped", 40, kStopResize);
  const Decision next = Decide(rec, c.Obs(kT0 + 50, plan), s);
  ASSERT_TRUE(next.plan) << Names(next);
  EXPECT_THAT(MemberIds(*next.plan), ElementsAre("a0-w0", "a2-w0", "a3-w0"));
  EXPECT_EQ(next.record.failures, 0) << "an exclusion is no failure";
  // Its idle worker does not make the 3-rank generation grow back.
  MarkRunning(c, *next.plan, 41, kT0 + 51);
  const Decision later = Decide(next.record, c.Obs(kT0 + 60, *next.plan), s);
  EXPECT_EQ(CountEvents(later, "resize_requested"), 0) << Names(later);
}

TEST(ElasticPolicyGray, OnASharedHostOnlyTheSlowWorkerIsExcluded) {
  Cluster c;
  c.AddHost("a1", "h1", 4);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1", "a1-w2", "a1-w3"}, 10, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  const JobSettings s = GraySettings(2, 4, StragglerPolicy::kExclude);
  RunSteps(c, plan, &rec, s, 10, 40, 2, 2.0);
  EXPECT_TRUE(rec.cooldown_until.empty()) << "h1's other ranks keep pace";
  ASSERT_TRUE(rec.excluded_workers.count("a1-w2"));
  for (const char* id : {"a1-w0", "a1-w1", "a1-w2", "a1-w3"}) MarkIdle(c, id, "stopped", 40, kStopResize);
  const Decision next = Decide(rec, c.Obs(kT0 + 50, plan), s);
  ASSERT_TRUE(next.plan) << Names(next);
  EXPECT_THAT(MemberIds(*next.plan), ElementsAre("a1-w0", "a1-w1", "a1-w3"));
}

TEST(ElasticPolicyGray, AHostWhoseOtherRankIsSlowButNotYetNamedCoolsDownWhole) {
  // h2's two ranks are both slowed; rank 3 turns slow first and is named while rank 2,
  // slow for fewer steps, is not yet: h2 does not keep pace, so the host cools down.
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1", "a2-w0", "a2-w1"}, 10, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  rec.last_recovery_seconds = 2;
  const JobSettings s = GraySettings(2, 4, StragglerPolicy::kExclude);
  for (int64_t step = 10; step <= 40 && rec.resize_requested_gen < 0; ++step) {
    Anatomy(c, plan, step, 3, 3.0);
    if (step >= 13) {  // rank 2 slowed three steps later: still unnamed when rank 3 is named
      WorkerRecord& w = c.W("a2-w0").rec;
      w.compute_seconds = 1.2;
      w.wait_seconds = 0.01;
    }
    const Decision d = Decide(rec, c.Obs(kT0 + static_cast<double>(step), plan), s);
    rec = d.record;
  }
  ASSERT_EQ(rec.resize_requested_gen, 0) << "rank 3 excluded";
  ASSERT_TRUE(rec.stragglers.count("a2-w0"));
  EXPECT_FALSE(rec.stragglers.at("a2-w0").detected) << "rank 2 was not named yet";
  EXPECT_TRUE(rec.cooldown_until.count("h2")) << "h2 as a whole, not one worker";
  EXPECT_TRUE(rec.excluded_workers.empty());
}

TEST(ElasticPolicyGray, ExcludeKeepsMinWorkersAndPaysOrNothing) {
  Cluster c;
  c.AddHost("a1", "h1", 4);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1", "a1-w2", "a1-w3"}, 10, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  // num_workers=4: nobody may leave.
  std::vector<std::string> warnings;
  RunSteps(c, plan, &rec, GraySettings(4, 4, StragglerPolicy::kExclude), 10, 40, 2, 2.0, nullptr, &warnings);
  EXPECT_TRUE(rec.excluded_workers.empty());
  EXPECT_EQ(rec.resize_requested_gen, -1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("3 workers would be left (min_workers=4"));
  // 995 of 1000 steps done: the rest is not worth a re-plan.
  rec = RunningRecord(plan, kT0);
  warnings.clear();
  RunSteps(c, plan, &rec, GraySettings(2, 4, StragglerPolicy::kExclude), 980, 995, 2, 2.0, nullptr, &warnings);
  EXPECT_TRUE(rec.excluded_workers.empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("not more than a re-plan's"));
}

TEST(ElasticPolicyGray, BeforeAnyRecoveryTheJobsOwnStartIsTheReplanCost) {
  // 50 steps: what is left when rank 2 is named saves a few seconds, more than the 3 s
  // this job took from its plan to its first step, less than the 10 s assumed without it.
  for (const bool start_measured : {true, false}) {
    Cluster c;
    c.AddHost("a1", "h1", 4);
    const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1", "a1-w2", "a1-w3"}, 10, kT0);
    JobRecord rec = RunningRecord(plan, kT0);
    if (start_measured) rec.planned_at = kT0 - 3;  // MarkRunning's first step began at kT0
    JobSettings s = GraySettings(2, 4, StragglerPolicy::kExclude);
    s.steps = 50;
    std::vector<std::string> names, warnings;
    RunSteps(c, plan, &rec, s, 10, 40, 2, 2.0, &names, &warnings);
    if (start_measured) {
      EXPECT_DOUBLE_EQ(rec.start_seconds, 3);
      ASSERT_TRUE(rec.excluded_workers.count("a1-w2")) << testing::PrintToString(warnings);
    } else {
      EXPECT_EQ(rec.start_seconds, 0);
      EXPECT_TRUE(rec.excluded_workers.empty());
      ASSERT_FALSE(warnings.empty());
      EXPECT_THAT(warnings[0], HasSubstr("assumed: none measured yet"));
    }
  }
}

TEST(ElasticPolicyGray, AnIdleSpareTakesTheStragglersPlaceInTheWeighing) {
  // num_workers=2:3 on one host of 4 slots: 3 ranks train, one worker idles. Rank 1 at
  // 1.4x: without a spare the two others would each compute 1.5x (slower than now), with
  // the spare in its place the world stays 3 and the step drops to the median's pace.
  for (const bool spare : {true, false}) {
    Cluster c;
    c.AddHost("a1", "h1", spare ? 4 : 3);
    const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1", "a1-w2"}, 10, kT0);
    JobRecord rec = RunningRecord(plan, kT0);
    rec.last_recovery_seconds = 5;
    std::vector<std::string> warnings;
    const JobSettings s = GraySettings(2, 3, StragglerPolicy::kExclude);
    RunSteps(c, plan, &rec, s, 10, 40, 1, 1.4, nullptr, &warnings);
    if (spare) {
      ASSERT_TRUE(rec.excluded_workers.count("a1-w1")) << testing::PrintToString(warnings);
      for (const char* id : {"a1-w0", "a1-w1", "a1-w2"}) MarkIdle(c, id, "stopped", 40, kStopResize);
      const Decision next = Decide(rec, c.Obs(kT0 + 50, plan), s);
      ASSERT_TRUE(next.plan) << Names(next);
      EXPECT_THAT(MemberIds(*next.plan), ElementsAre("a1-w0", "a1-w2", "a1-w3"));
    } else {
      EXPECT_TRUE(rec.excluded_workers.empty());
      ASSERT_EQ(warnings.size(), 1u);
      EXPECT_THAT(warnings[0], HasSubstr("on 2 ranks"));
    }
  }
}

TEST(ElasticPolicyGray, MalformedAnatomyIsRefusedWithAWarning) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 10, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  Anatomy(c, plan, 20, -1, 1);
  c.W("a1-w1").rec.compute_seconds = -1;
  const Decision d = Decide(rec, c.Obs(kT0 + 1, plan), GraySettings(1, 2, StragglerPolicy::kExclude));
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_THAT(d.warnings[0], HasSubstr("rank 1 (a1-w1)"));
  EXPECT_EQ(CountEvents(d, "straggler_detected"), 0);
}

// ---- hangs ---------------------------------------------------------------------------------

void InCollective(Cluster& c, const std::string& id, int64_t seq, bool inside, double last_progress) {
  WorkerRecord& r = c.W(id).rec;
  r.collective_seq = seq;
  r.collective_kind = "allreduce";
  r.in_collective = inside;
  r.last_progress = last_progress;
}

TEST(ElasticPolicyGray, AMemberKilledAsHungIsNamedByTheHangDiagnosis) {
  Cluster c;
  c.AddHost("a1", "h1", 1).AddHost("a2", "h2", 1).AddHost("a3", "h3", 1);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a2-w0", "a3-w0"}, 10, kT0);
  const double now = kT0 + 70;
  InCollective(c, "a1-w0", 33, true, now - 0.1);
  InCollective(c, "a2-w0", 33, true, now - 61);  // SIGSTOPped inside #33, killed by its agent
  InCollective(c, "a3-w0", 33, true, now - 0.2);
  MarkExited(c, "a2-w0", "hung", now - 0.5, "sent nothing for 60.0s");
  const Decision d = Decide(RunningRecord(plan, kT0), c.Obs(now, plan), Settings(1, 3));
  ASSERT_EQ(CountEvents(d, "hang_diagnosed"), 1) << Names(d);
  const auto e = FindEvent(d, "hang_diagnosed");
  EXPECT_EQ(e->fields["behind"], nlohmann::json::array({1}));
  EXPECT_EQ(e->fields["hosts"], nlohmann::json::array({"h2"}));
  EXPECT_EQ(e->fields["trigger"], "silent_rank");
  EXPECT_EQ(d.record.hang_diagnosed_gen, 0);
  for (const auto& [agent, cmd] : d.commands) EXPECT_NE(cmd.worker, "a2-w0") << "already gone";
  // Once per generation.
  EXPECT_EQ(CountEvents(Decide(d.record, c.Obs(now + 1, plan), Settings(1, 3)), "hang_diagnosed"), 0);
}

TEST(ElasticPolicyGray, ACollectiveTimeoutReplacesOnlyTheRankBehind) {
  Cluster c;
  c.AddHost("a1", "h1", 1).AddHost("a2", "h2", 1).AddHost("a3", "h3", 1);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a2-w0", "a3-w0"}, 10, kT0);
  const double now = kT0 + 70;
  // Ranks 0 and 2 timed out in #50; rank 1 never entered it (stuck computing after #49).
  InCollective(c, "a1-w0", 50, true, now - 0.1);
  InCollective(c, "a2-w0", 49, false, now - 0.1);
  InCollective(c, "a3-w0", 50, true, now - 0.1);
  MarkIdle(c, "a1-w0", "failed", 10);
  MarkIdle(c, "a3-w0", "failed", 10);
  c.W("a1-w0").rec.timed_out = c.W("a3-w0").rec.timed_out = true;
  const Decision d = Decide(RunningRecord(plan, kT0), c.Obs(now, plan), Settings(1, 3));
  ASSERT_EQ(CountEvents(d, "hang_diagnosed"), 1) << Names(d);
  EXPECT_EQ(FindEvent(d, "hang_diagnosed")->fields["behind"], nlohmann::json::array({1}));
  EXPECT_EQ(FindEvent(d, "hang_diagnosed")->fields["trigger"], "collective_timeout");
  ASSERT_EQ(d.commands.size(), 1u);
  EXPECT_EQ(d.commands[0].first, "a2");
  EXPECT_EQ(d.commands[0].second.action, CommandAction::kHung);
  EXPECT_EQ(d.commands[0].second.worker, "a2-w0");
}

TEST(ElasticPolicyGray, AMemberThatDiedExplainsTheOthersFailedCollectives) {
  // Rank 1 was killed; ranks 0 and 2 failed in their collectives at different numbers.
  // Nobody is hung: no diagnosis, and no survivor (with its state) is killed.
  Cluster c;
  c.AddHost("a1", "h1", 1).AddHost("a2", "h2", 1).AddHost("a3", "h3", 1);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a2-w0", "a3-w0"}, 10, kT0);
  const double now = kT0 + 5;
  InCollective(c, "a1-w0", 50, true, now - 0.1);
  InCollective(c, "a2-w0", 50, true, now - 0.3);
  InCollective(c, "a3-w0", 49, true, now - 0.1);
  MarkExited(c, "a2-w0", "failure", now - 0.2);
  MarkIdle(c, "a1-w0", "failed", 10);
  MarkIdle(c, "a3-w0", "failed", 10);
  const Decision d = Decide(RunningRecord(plan, kT0), c.Obs(now, plan), Settings(1, 3));
  EXPECT_EQ(CountEvents(d, "hang_diagnosed"), 0) << Names(d);
  for (const auto& [agent, cmd] : d.commands) EXPECT_NE(cmd.action, CommandAction::kHung) << cmd.worker;
}

TEST(ElasticPolicyGray, APeersErrorBeforeItsHostIsLostNamesNobody) {
  // Host h2 lost power: its rank's sockets reset, so ranks 0 and 2 failed at once (not
  // on a timeout), at collective numbers a moment's reports apart; h2's agent still
  // holds its lease, so rank 1 still looks alive. Nobody is diagnosed or killed (on
  // test_partitions.sh such a diagnosis killed survivors and cooled their hosts down).
  Cluster c;
  c.AddHost("a1", "h1", 1).AddHost("a2", "h2", 1).AddHost("a3", "h3", 1);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a2-w0", "a3-w0"}, 10, kT0);
  const double now = kT0 + 5;
  InCollective(c, "a1-w0", 50, false, now - 0.1);
  InCollective(c, "a2-w0", 54, true, now - 0.2);
  InCollective(c, "a3-w0", 47, true, now - 0.1);
  MarkIdle(c, "a1-w0", "failed", 10);
  MarkIdle(c, "a3-w0", "failed", 10);
  const Decision d = Decide(RunningRecord(plan, kT0), c.Obs(now, plan), Settings(1, 3));
  EXPECT_EQ(CountEvents(d, "hang_diagnosed"), 0) << Names(d);
  for (const auto& [agent, cmd] : d.commands) EXPECT_NE(cmd.action, CommandAction::kHung) << cmd.worker;
}

TEST(ElasticPolicyGray, AStalledGenerationKillsOnlyTheRankBehind) {
  Cluster c;
  c.AddHost("a1", "h1", 1).AddHost("a2", "h2", 1);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a2-w0"}, 17, kT0);
  JobSettings s = Settings(1, 2);
  const double now = kT0 + 2 * s.heartbeat_timeout + 5;
  InCollective(c, "a1-w0", 80, true, now - 0.1);
  InCollective(c, "a2-w0", 79, false, now - 0.1);
  const Decision d = Decide(RunningRecord(plan, kT0), c.Obs(now, plan), s);
  EXPECT_EQ(CountEvents(d, "generation_stalled"), 1) << Names(d);
  EXPECT_EQ(FindEvent(d, "hang_diagnosed")->fields["behind"], nlohmann::json::array({1}));
  ASSERT_EQ(d.commands.size(), 1u);
  EXPECT_EQ(d.commands[0].second.worker, "a2-w0");
  ASSERT_TRUE(d.stop);
  EXPECT_TRUE(d.stop->abort) << "the others give up and keep their state";
}

}  // namespace
}  // namespace elastrain
