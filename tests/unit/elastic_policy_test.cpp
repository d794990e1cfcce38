// The controller's decision function (elastic/policy.h) without processes: hand-built
// Observations (agents, their workers' records, the current plan) and JobSettings with
// a chosen mesh rule, fed through Decide one step at a time the way the controller's
// loop would, carrying each Decision's record into the next call. Covers the first
// generation and its startup grace, failures (survivors, the failure budget, lost
// hosts), preemption, waiting for resources, scale-up, the restore choice, host
// cool-down, stragglers, the user's stop, completion, placement, whole-generation hangs
// and the fail_at_step injection.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "plan/mesh.h"
#include "wire/job_state.h"
#include "elastic/policy.h"
#include "wire/protocol.h"
#include "wire/stop_reason.h"
#include "policy_test_builders.h"

namespace elastrain {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::elastrain::policy_test;  // NOLINT: the builders are the tests' vocabulary

// ---- 1. The first generation ---------------------------------------------------------------

TEST(ElasticPolicyFirstGeneration, TakesEveryIdleWorker) {
  Cluster c;
  c.AddHost("a1", "h1", 4);
  const JobSettings s = Settings(2, 4);
  JobRecord rec;
  rec.job_id = "job-1";
  const Decision d = Decide(rec, c.Obs(kT0, std::nullopt), s);
  ASSERT_TRUE(d.plan) << Names(d);
  const Plan& p = *d.plan;
  EXPECT_EQ(p.generation, 0);
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.data, 4);
  EXPECT_EQ(p.fsdp, 1);
  EXPECT_EQ(p.tensor, 1);
  EXPECT_EQ(p.job_id, "job-1");
  EXPECT_EQ(p.rendezvous.ToString(), "file:/tmp/rdzv");
  EXPECT_EQ(p.created_at, kT0);
  EXPECT_FALSE(p.inject_failure);
  EXPECT_THAT(MemberIds(p), ElementsAre("a1-w0", "a1-w1", "a1-w2", "a1-w3"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p.members[i].rank, i);
    EXPECT_EQ(p.members[i].agent, "a1");
    EXPECT_EQ(p.members[i].host, "h1");
    EXPECT_EQ(p.members[i].pid, c.W(p.members[i].worker).rec.pid);
  }
  EXPECT_EQ(p.restore.kind, RestoreKind::kCheckpoint);
  EXPECT_EQ(p.restore.step, 0);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_EQ(d.record.generation, 0);
  EXPECT_EQ(d.record.world, 4);
  EXPECT_EQ(d.record.restarts, 0);
  EXPECT_EQ(d.record.failures, 0);
  EXPECT_EQ(d.record.wait_since, 0);
  EXPECT_EQ(d.record.started_at, kT0);
  EXPECT_FALSE(d.shutdown);
  EXPECT_FALSE(d.stop);
  EXPECT_TRUE(d.commands.empty());
  const auto started = FindEvent(d, "generation_started");
  ASSERT_TRUE(started) << Names(d);
  EXPECT_EQ(started->fields["generation"], 0);
  EXPECT_EQ(started->fields["world"], 4);
  EXPECT_EQ(started->fields["restore"]["kind"], "checkpoint");
  // A controller that heard of no checkpoint (a rerun's) names no step: the workers
  // restore the newest one they find, and their state_restored event names it.
  EXPECT_FALSE(started->fields["restore"].contains("step")) << started->fields.dump();
  EXPECT_EQ(FindEvent(d, "job_state")->fields["reason"], "generation 0 with 4 workers (restore from the latest checkpoint, if any)");
  EXPECT_EQ(started->fields["members"].size(), 4u);
  EXPECT_EQ(started->fields["source"], "controller");
  EXPECT_THAT(Transitions(d), ElementsAre("PENDING->RUNNING"));
}

TEST(ElasticPolicyFirstGeneration, WaitsForStartingWorkersUntilTheStartupGrace) {
  Cluster c;
  c.AddAgent("a1", "h1", 4);
  c.AddWorker("a1-w0", "a1");
  c.AddWorker("a1-w1", "a1");
  c.AddWorker("a1-w2", "a1", "starting");
  c.AddWorker("a1-w3", "a1", "starting");
  const JobSettings s = Settings(2, 4);
  Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  EXPECT_FALSE(d.plan) << "2 of 4 still starting: wait";
  EXPECT_EQ(d.record.state, JobState::kPending);
  EXPECT_EQ(d.record.wait_since, kT0);
  EXPECT_FALSE(d.shutdown);

  d = Decide(d.record, c.Obs(kT0 + kStartupGraceSeconds - 0.5, std::nullopt), s);
  EXPECT_FALSE(d.plan) << "still within the startup grace";
  EXPECT_EQ(d.record.state, JobState::kPending);
  EXPECT_EQ(d.record.wait_since, kT0) << "the wait began at the first call";

  d = Decide(d.record, c.Obs(kT0 + kStartupGraceSeconds, std::nullopt), s);
  ASSERT_TRUE(d.plan) << "the grace is over: start with who is ready. " << Names(d);
  EXPECT_EQ(d.plan->world, 2);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a1-w1"));
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_EQ(d.record.wait_since, 0);
}

TEST(ElasticPolicyFirstGeneration, StartsAtOnceWhenTheStartingWorkersWouldNotBeNeeded) {
  // max_workers idle already: starting ones do not hold it back.
  Cluster c;
  c.AddAgent("a1", "h1", 3);
  c.AddWorker("a1-w0", "a1");
  c.AddWorker("a1-w1", "a1");
  c.AddWorker("a1-w2", "a1", "starting");
  const Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->world, 2);
}

TEST(ElasticPolicyFirstGeneration, TakesTheLargestWorldWithAValidMesh) {
  Cluster c;
  c.AddHost("a1", "h1", 3);
  JobSettings s = Settings(1, 4);
  s.mesh_for = EvenOnly;
  const Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->world, 2) << "3 idle, but only even worlds run";
  EXPECT_EQ(d.record.world, 2);
}

TEST(ElasticPolicyChooseWorldSize, LargestValidWithinBounds) {
  JobSettings s = Settings(2, 6);
  s.mesh_for = EvenOnly;
  Mesh m(1, 1, 1);
  EXPECT_EQ(ChooseWorldSize(5, s, &m), 4);
  EXPECT_EQ(m.data(), 4);
  EXPECT_EQ(ChooseWorldSize(9, s, &m), 6) << "at most max_workers";
  EXPECT_EQ(ChooseWorldSize(3, s, nullptr), 2);
  EXPECT_EQ(ChooseWorldSize(1, s, nullptr), 0) << "below min_workers";
  s.min_workers = 3;
  EXPECT_EQ(ChooseWorldSize(3, s, nullptr), 0) << "3 is the only size in range and it is odd";
}

// ---- 2, 3. Failures -------------------------------------------------------------------------

// Four workers on a1, generation 0 running with ranks deliberately not in id order.
struct FourOnOne {
  Cluster c;
  Plan plan;
  JobRecord rec;
  FourOnOne() {
    c.AddHost("a1", "h1", 4);
    plan = RunningPlan(c, 0, {"a1-w3", "a1-w0", "a1-w2", "a1-w1"}, 7, kT0 - 10);
    rec = RunningRecord(plan, kT0 - 10);
  }
};

TEST(ElasticPolicyFailure, WaitsForSurvivorsThenRecoversFromTheNewestReplica) {
  FourOnOne f;
  JobSettings s = Settings(2, 4);
  s.max_failures = 3;
  // Rank 1 (a1-w0) is killed; the others are still in their collectives.
  const std::string desc = MarkExited(f.c, "a1-w0", "failure", kT0 + 1);
  Decision d = Decide(f.rec, f.c.Obs(kT0 + 2, f.plan), s);
  EXPECT_FALSE(d.plan) << "survivors are live: wait for them. " << Names(d);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_EQ(d.record.failures, 0) << "counted when the generation has ended";
  EXPECT_EQ(d.record.ending_since, kT0 + 2);
  EXPECT_TRUE(d.commands.empty());
  ASSERT_EQ(CountEvents(d, "worker_failed"), 1) << Names(d);
  const auto wf = FindEvent(d, "worker_failed");
  EXPECT_EQ(wf->fields["rank"], 1);
  EXPECT_EQ(wf->fields["worker"], "a1-w0");
  EXPECT_EQ(wf->fields["host"], "h1");
  EXPECT_EQ(wf->fields["reason"], desc);
  EXPECT_EQ(wf->fields["signal"], 9);
  EXPECT_EQ(wf->fields["detected_at"], kT0 + 1);
  EXPECT_EQ(CountEvents(d, "generation_failed"), 0);

  // The same view again: the loss is not logged twice.
  d = Decide(d.record, f.c.Obs(kT0 + 3, f.plan), s);
  EXPECT_FALSE(d.plan);
  EXPECT_EQ(CountEvents(d, "worker_failed"), 0) << Names(d);

  // The survivors notice and go idle with outcome failed; a1-w2 (old rank 2) holds the
  // newest replica.
  MarkIdle(f.c, "a1-w3", "failed", 7);
  MarkIdle(f.c, "a1-w2", "failed", 8);
  MarkIdle(f.c, "a1-w1", "failed", 6);
  d = Decide(d.record, f.c.Obs(kT0 + 4, f.plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  const Plan& p = *d.plan;
  EXPECT_EQ(p.generation, 1);
  EXPECT_EQ(p.world, 3);
  // Survivors keep their previous rank order: old ranks 0, 2, 3 -> new 0, 1, 2.
  EXPECT_THAT(MemberIds(p), ElementsAre("a1-w3", "a1-w2", "a1-w1"));
  EXPECT_EQ(p.restore.kind, RestoreKind::kMemory);
  EXPECT_EQ(p.restore.source_rank, 1) << "a1-w2 has the largest state_step";
  EXPECT_EQ(p.restore.step, 8);
  EXPECT_EQ(d.record.failures, 1);
  EXPECT_EQ(d.record.restarts, 1);
  EXPECT_EQ(d.record.generation, 1);
  EXPECT_EQ(d.record.world, 3);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_EQ(d.record.ending_since, 0);
  EXPECT_TRUE(d.record.noted.empty());
  EXPECT_EQ(d.record.host_failures["h1"].size(), 1u);
  EXPECT_FALSE(d.shutdown);
  EXPECT_EQ(CountEvents(d, "worker_failed"), 0) << "logged in the first decision";
  const auto gf = FindEvent(d, "generation_failed");
  ASSERT_TRUE(gf) << Names(d);
  EXPECT_EQ(gf->fields["generation"], 0);
  EXPECT_EQ(gf->fields["failures"], 1);
  EXPECT_EQ(gf->fields["reason"], desc) << "the cause is the death, not the survivors' view of it";
  EXPECT_THAT(Transitions(d), ElementsAre("RUNNING->RECOVERING", "RECOVERING->RUNNING"));
  EXPECT_EQ(CountEvents(d, "generation_started"), 1);
}

TEST(ElasticPolicyFailure, ManyMembersLostInOneGenerationCountOnce) {
  FourOnOne f;
  MarkExited(f.c, "a1-w0", "failure", kT0 + 1);
  MarkExited(f.c, "a1-w1", "failure", kT0 + 2);
  MarkIdle(f.c, "a1-w3", "failed", 7);
  MarkIdle(f.c, "a1-w2", "failed", 7);
  const Decision d = Decide(f.rec, f.c.Obs(kT0 + 3, f.plan), Settings(2, 4));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.record.failures, 1);
  EXPECT_EQ(CountEvents(d, "worker_failed"), 2);
  EXPECT_EQ(CountEvents(d, "generation_failed"), 1);
  EXPECT_EQ(d.plan->world, 2);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w3", "a1-w2"));
  // The first death is the cause.
  EXPECT_THAT(FindEvent(d, "generation_failed")->fields["reason"].get<std::string>(), HasSubstr("rank 1 "));
}

TEST(ElasticPolicyFailure, BudgetOfZeroFailsTheJobWithTheWholeStory) {
  FourOnOne f;
  JobSettings s = Settings(2, 4);
  s.max_failures = 0;
  const std::string desc = MarkExited(f.c, "a1-w0", "failure", kT0 + 1);
  Decision d = Decide(f.rec, f.c.Obs(kT0 + 2, f.plan), s);
  EXPECT_EQ(d.record.state, JobState::kRunning) << "survivors still live";
  EXPECT_FALSE(d.shutdown);
  MarkIdle(f.c, "a1-w3", "failed", 7);
  MarkIdle(f.c, "a1-w2", "failed", 7);
  MarkIdle(f.c, "a1-w1", "failed", 7);
  d = Decide(d.record, f.c.Obs(kT0 + 3, f.plan), s);
  EXPECT_EQ(d.record.state, JobState::kFailed);
  EXPECT_TRUE(d.shutdown);
  EXPECT_FALSE(d.plan);
  EXPECT_EQ(d.record.failures, 1);
  EXPECT_EQ(d.record.ended_at, kT0 + 3);
  const std::string& why = d.record.reason;
  EXPECT_THAT(why, HasSubstr("rank 1"));
  EXPECT_THAT(why, HasSubstr("host h1"));
  EXPECT_THAT(why, HasSubstr("killed by signal 9 (SIGKILL)"));
  EXPECT_THAT(why, HasSubstr(desc));
  EXPECT_THAT(why, HasSubstr("generation 0"));
  EXPECT_THAT(why, HasSubstr("step 7"));
  EXPECT_THAT(why, HasSubstr("max_failures=0"));
  EXPECT_THAT(Transitions(d), ElementsAre("RUNNING->FAILED"));
  EXPECT_EQ(CountEvents(d, "generation_failed"), 1);

  // A terminal record stays as it is.
  const Decision again = Decide(d.record, f.c.Obs(kT0 + 10, f.plan), s);
  EXPECT_EQ(again.record.state, JobState::kFailed);
  EXPECT_TRUE(again.shutdown);
  EXPECT_FALSE(again.plan);
  EXPECT_TRUE(again.events.empty());
}

TEST(ElasticPolicyFailure, BudgetOfOneAllowsExactlyOneFailure) {
  FourOnOne f;
  JobSettings s = Settings(2, 4);
  s.max_failures = 1;
  MarkExited(f.c, "a1-w0", "failure", kT0 + 1);
  for (const char* id : {"a1-w3", "a1-w2", "a1-w1"}) MarkIdle(f.c, id, "failed", 7);
  Decision d = Decide(f.rec, f.c.Obs(kT0 + 2, f.plan), s);
  ASSERT_TRUE(d.plan) << "failure 1 of max_failures=1 is allowed. " << Names(d);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_THAT(d.record.reason, HasSubstr("generation 1"));
  EXPECT_THAT(FindEvent(d, "job_state")->fields["reason"].get<std::string>(), HasSubstr("failure 1 of max_failures=1"));
  const Plan plan = *d.plan;
  MarkRunning(f.c, plan, 8, kT0 + 3);
  MarkExited(f.c, "a1-w3", "failure", kT0 + 4);
  MarkIdle(f.c, "a1-w2", "failed", 8);
  MarkIdle(f.c, "a1-w1", "failed", 8);
  d = Decide(d.record, f.c.Obs(kT0 + 5, plan), s);
  EXPECT_EQ(d.record.state, JobState::kFailed) << Names(d);
  EXPECT_EQ(d.record.failures, 2);
  EXPECT_TRUE(d.shutdown);
  EXPECT_THAT(d.record.reason, HasSubstr("max_failures=1, 2 failures"));
}

TEST(ElasticPolicyFailure, UnlimitedBudgetKeepsGoing) {
  FourOnOne f;
  JobSettings s = Settings(2, 4);
  s.max_failures = -1;
  f.rec.failures = 100;
  MarkExited(f.c, "a1-w0", "failure", kT0 + 1);
  for (const char* id : {"a1-w3", "a1-w2", "a1-w1"}) MarkIdle(f.c, id, "failed", 7);
  const Decision d = Decide(f.rec, f.c.Obs(kT0 + 2, f.plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.record.failures, 101);
  EXPECT_EQ(d.record.state, JobState::kRunning);
}

// ---- 4. Preemption ------------------------------------------------------------------------

TEST(ElasticPolicyPreemption, ShrinksWithoutCountingAFailure) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 1);
  const auto [plan, rec] = StartGeneration(c, 0, {"a1-w0", "a1-w1", "a2-w0"}, 12, kT0 - 5);
  const JobSettings s = Settings(2, 4);

  // a2 got a preemption notice; its worker left; the others stop at the step boundary.
  c.agents[1].preempting = true;
  MarkExited(c, "a2-w0", "preempted", kT0, "left after a preemption notice");
  Decision d = Decide(rec, c.Obs(kT0 + 1, plan), s);
  EXPECT_FALSE(d.plan);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_EQ(CountEvents(d, "worker_preempted"), 1) << Names(d);

  MarkIdle(c, "a1-w0", "stopped", 12, kStopPreemption);
  MarkIdle(c, "a1-w1", "stopped", 12, kStopPreemption);
  d = Decide(d.record, c.Obs(kT0 + 2, plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->generation, 1);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a1-w1"));
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kMemory);
  EXPECT_EQ(d.plan->restore.step, 12);
  EXPECT_EQ(d.record.failures, 0);
  EXPECT_EQ(d.record.restarts, 1);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_THAT(Transitions(d), ElementsAre("RUNNING->RESIZING", "RESIZING->RUNNING"));
  const auto resizing = FindEvent(d, "job_state");
  ASSERT_TRUE(resizing);
  EXPECT_THAT(resizing->fields["reason"].get<std::string>(), HasSubstr("preemption"));
  EXPECT_EQ(CountEvents(d, "generation_failed"), 0);
  EXPECT_TRUE(d.record.host_failures.empty()) << "a preemption is no host failure";
}

// The preempted agent is gone (lease revoked); its last report (elastrain/departed/a2)
// shows its worker as the agent left it: exited, kind "preempted".
TEST(ElasticPolicyPreemption, WorkerOfADepartedAgentIsNoFailure) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 1);
  const auto [plan, rec] = StartGeneration(c, 0, {"a1-w0", "a1-w1", "a2-w0"}, 12, kT0 - 5);
  MarkExited(c, "a2-w0", "preempted", kT0 - 1, "did not leave within preemption_notice_seconds; killed");
  MarkIdle(c, "a1-w0", "stopped", 12, kStopPreemption);
  MarkIdle(c, "a1-w1", "stopped", 12, kStopPreemption);
  Observation o = c.Obs(kT0, plan);
  o.agents.pop_back();  // a2 no longer leased, no live report
  o.reported.pop_back();
  o.workers.back().departed = true;
  o.workers.back().host = "";  // the controller knows no host for a departed agent
  const Decision d = Decide(rec, o, Settings(2, 4));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.record.failures, 0);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a1-w1"));
  EXPECT_THAT(Transitions(d), ElementsAre("RUNNING->RESIZING", "RESIZING->RUNNING"));
}

// A member seen only in a departed agent's report, not yet exited, left with its
// preempted host: a preemption, not a failure (the agent normally reports such workers
// exited with kind "preempted"; this covers a report written earlier).
TEST(ElasticPolicyPreemption, NotYetExitedWorkerOfADepartedAgentIsNoFailure) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 1);
  const auto [plan, rec] = StartGeneration(c, 0, {"a1-w0", "a1-w1", "a2-w0"}, 12, kT0 - 5);
  Observation o = c.Obs(kT0, plan);
  o.agents.pop_back();    // a2 no longer leased
  o.reported.pop_back();
  o.workers.back().departed = true;  // from elastrain/departed/a2
  MarkIdle(c, "a1-w0", "stopped", 12, kStopPreemption);
  MarkIdle(c, "a1-w1", "stopped", 12, kStopPreemption);
  o.workers[0] = c.W("a1-w0");
  o.workers[1] = c.W("a1-w1");
  const Decision d = Decide(rec, o, Settings(2, 4));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.record.failures, 0);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a1-w1"));
  EXPECT_THAT(Transitions(d), ElementsAre("RUNNING->RESIZING", "RESIZING->RUNNING"));
}

// ---- 5. Host loss -------------------------------------------------------------------------

TEST(ElasticPolicyHostLoss, LostHostIsAFailureAndLeavesThePlan) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 1);
  const auto [plan, rec] = StartGeneration(c, 0, {"a1-w0", "a2-w0", "a1-w1"}, 20, kT0 - 5);
  const JobSettings s = Settings(2, 4);

  c.RemoveAgent("a2");  // its lease expired: neither agent nor report
  Decision d = Decide(rec, c.Obs(kT0, plan), s);
  EXPECT_FALSE(d.plan);
  ASSERT_EQ(CountEvents(d, "host_lost"), 1) << Names(d);
  const auto hl = FindEvent(d, "host_lost");
  EXPECT_EQ(hl->fields["host"], "h2");
  EXPECT_EQ(hl->fields["rank"], 1);
  EXPECT_THAT(hl->fields["reason"].get<std::string>(), HasSubstr("agent a2"));

  MarkIdle(c, "a1-w0", "failed", 20);
  MarkIdle(c, "a1-w1", "failed", 20);
  d = Decide(d.record, c.Obs(kT0 + 1, plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.record.failures, 1);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a1-w1"));
  EXPECT_THAT(MemberHosts(*d.plan), ElementsAre("h1", "h1"));
  EXPECT_EQ(CountEvents(d, "host_lost"), 0) << "logged once";
  EXPECT_EQ(CountEvents(d, "generation_failed"), 1);
  EXPECT_THAT(FindEvent(d, "generation_failed")->fields["reason"].get<std::string>(), HasSubstr("lost with its host"));
  EXPECT_EQ(d.record.host_failures.count("h2"), 1u);
  EXPECT_EQ(d.record.host_failures.count("h1"), 0u) << "the survivors' errors are not their host's fault";
}

TEST(ElasticPolicyHostLoss, AgentThatHasNotReportedYetIsNotLost) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 3, kT0);
  Observation o = c.Obs(kT0 + 1, plan);
  o.reported.clear();
  o.workers.clear();
  const Decision d = Decide(RunningRecord(plan, kT0), o, Settings(1, 2));
  EXPECT_EQ(CountEvents(d, "host_lost"), 0) << Names(d);
  EXPECT_EQ(CountEvents(d, "worker_error"), 0) << Names(d);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_EQ(d.record.ending_since, 0);
  EXPECT_FALSE(d.plan);
}

TEST(ElasticPolicyHostLoss, WorkerMissingFromALiveAgentsReportIsLost) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 3, kT0);
  c.workers.pop_back();  // a1 reports, but no longer a1-w1
  const Decision d = Decide(RunningRecord(plan, kT0), c.Obs(kT0 + 1, plan), Settings(1, 2));
  ASSERT_EQ(CountEvents(d, "host_lost"), 1) << Names(d);
  EXPECT_THAT(FindEvent(d, "host_lost")->fields["reason"].get<std::string>(), HasSubstr("no longer reported"));
}

// ---- 6. Waiting for resources ----------------------------------------------------------------

TEST(ElasticPolicyResources, WaitsBelowMinWorkersThenFailsAfterTheTimeout) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  JobSettings s = Settings(3, 4);
  s.resource_wait_timeout = 300;
  Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  EXPECT_FALSE(d.plan);
  EXPECT_EQ(d.record.state, JobState::kWaitingForResources);
  EXPECT_THAT(d.record.reason, HasSubstr("min_workers=3"));
  EXPECT_THAT(d.record.reason, HasSubstr("2 idle workers"));
  EXPECT_FALSE(d.shutdown);
  EXPECT_EQ(d.record.wait_since, kT0);
  EXPECT_THAT(Transitions(d), ElementsAre("PENDING->WAITING_FOR_RESOURCES"));

  d = Decide(d.record, c.Obs(kT0 + 299, std::nullopt), s);
  EXPECT_EQ(d.record.state, JobState::kWaitingForResources);
  EXPECT_FALSE(d.shutdown);
  EXPECT_TRUE(Transitions(d).empty()) << "no new transition while waiting";

  d = Decide(d.record, c.Obs(kT0 + 301, std::nullopt), s);
  EXPECT_EQ(d.record.state, JobState::kFailed);
  EXPECT_TRUE(d.shutdown);
  EXPECT_FALSE(d.plan);
  EXPECT_THAT(d.record.reason, HasSubstr("resource_wait_timeout=300"));
  EXPECT_THAT(d.record.reason, HasSubstr("min_workers=3"));
  EXPECT_THAT(Transitions(d), ElementsAre("WAITING_FOR_RESOURCES->FAILED"));
}

TEST(ElasticPolicyResources, StartsWhenWorkersArriveWhileWaiting) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const JobSettings s = Settings(3, 4);
  Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  ASSERT_EQ(d.record.state, JobState::kWaitingForResources);
  c.AddHost("a2", "h2", 1);
  d = Decide(d.record, c.Obs(kT0 + 200, std::nullopt), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->world, 3);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_EQ(d.record.wait_since, 0);
  EXPECT_THAT(Transitions(d), ElementsAre("WAITING_FOR_RESOURCES->RUNNING"));
}

TEST(ElasticPolicyResources, EnoughSlotsButTooFewIdleIsNotWaitingForResources) {
  // 3 slots (>= min 3), one worker stuck starting past the grace: no plan, but the slots
  // exist, so the job is not WAITING_FOR_RESOURCES (and still times out).
  Cluster c;
  c.AddAgent("a1", "h1", 3);
  c.AddWorker("a1-w0", "a1");
  c.AddWorker("a1-w1", "a1");
  c.AddWorker("a1-w2", "a1", "starting");
  const JobSettings s = Settings(3, 3);
  Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  d = Decide(d.record, c.Obs(kT0 + 60, std::nullopt), s);
  EXPECT_FALSE(d.plan);
  EXPECT_EQ(d.record.state, JobState::kPending);
  d = Decide(d.record, c.Obs(kT0 + 301, std::nullopt), s);
  EXPECT_EQ(d.record.state, JobState::kFailed);
  EXPECT_THAT(d.record.reason, HasSubstr("resource_wait_timeout"));
}

// ---- 7. Scale-up --------------------------------------------------------------------------

struct TwoRunningTwoIdle {
  Cluster c;
  Plan plan;
  JobRecord rec;
  TwoRunningTwoIdle() {
    c.AddHost("a1", "h1", 4);
    plan = RunningPlan(c, 0, {"a1-w1", "a1-w0"}, 30, kT0);
    rec = RunningRecord(plan, kT0);
  }
};

TEST(ElasticPolicyScaleUp, AsksTheRunningGenerationToStopOnce) {
  TwoRunningTwoIdle f;
  const JobSettings s = Settings(1, 4);
  Decision d = Decide(f.rec, f.c.Obs(kT0 + 1, f.plan), s);
  EXPECT_FALSE(d.plan);
  ASSERT_TRUE(d.stop) << Names(d);
  EXPECT_EQ(d.stop->generation, 0);
  EXPECT_EQ(d.stop->reasons, kStopResize);
  EXPECT_EQ(d.record.resize_requested_gen, 0);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  ASSERT_EQ(CountEvents(d, "resize_requested"), 1) << Names(d);
  EXPECT_EQ(FindEvent(d, "resize_requested")->fields["target"], 4);
  EXPECT_EQ(FindEvent(d, "resize_requested")->fields["world"], 2);

  const Decision again = Decide(d.record, f.c.Obs(kT0 + 2, f.plan), s);
  EXPECT_FALSE(again.stop) << "asked already";
  EXPECT_EQ(CountEvents(again, "resize_requested"), 0) << Names(again);
  EXPECT_FALSE(again.plan);

  // The generation stops at its checkpoint boundary: the next takes all four, the old
  // members first in their old order.
  MarkIdle(f.c, "a1-w1", "stopped", 30, kStopResize);
  MarkIdle(f.c, "a1-w0", "stopped", 30, kStopResize);
  f.c.W("a1-w1").rec.checkpoint_step = 30;
  const Decision next = Decide(again.record, f.c.Obs(kT0 + 3, f.plan), s);
  ASSERT_TRUE(next.plan) << Names(next);
  EXPECT_EQ(next.plan->world, 4);
  EXPECT_THAT(MemberIds(*next.plan), ElementsAre("a1-w1", "a1-w0", "a1-w2", "a1-w3"));
  EXPECT_EQ(next.record.failures, 0);
  EXPECT_EQ(next.record.latest_checkpoint_step, 30);
  EXPECT_EQ(next.record.resize_requested_gen, -1);
  EXPECT_THAT(Transitions(next), ElementsAre("RUNNING->RESIZING", "RESIZING->RUNNING"));
  EXPECT_THAT(next.record.reason, HasSubstr("generation 1 with 4 workers"));
}

TEST(ElasticPolicyScaleUp, NoResizeAtMaxWorkers) {
  TwoRunningTwoIdle f;
  const Decision d = Decide(f.rec, f.c.Obs(kT0 + 1, f.plan), Settings(1, 2));
  EXPECT_FALSE(d.stop);
  EXPECT_EQ(CountEvents(d, "resize_requested"), 0);
}

TEST(ElasticPolicyScaleUp, NoResizeWhenTheLargerWorldHasNoMesh) {
  TwoRunningTwoIdle f;
  f.c.workers.pop_back();  // one extra idle worker: 3 would be odd
  JobSettings s = Settings(1, 4);
  s.mesh_for = EvenOnly;
  Decision d = Decide(f.rec, f.c.Obs(kT0 + 1, f.plan), s);
  EXPECT_FALSE(d.stop) << Names(d);
  f.c.AddWorker("a1-w9", "a1");  // two extra: 4 runs
  d = Decide(d.record, f.c.Obs(kT0 + 2, f.plan), s);
  ASSERT_TRUE(d.stop) << Names(d);
  EXPECT_EQ(d.stop->reasons, kStopResize);
  EXPECT_EQ(FindEvent(d, "resize_requested")->fields["target"], 4);
}

// While a generation runs min_workers on h2, the idle workers of a cooled-down host h1
// must not trigger a resize: the next plan would leave h1 out again (same world), a
// pointless stop and restart every generation while the cool-down lasts.
TEST(ElasticPolicyScaleUp, CooledHostDoesNotTriggerAResize) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 2);
  const Plan plan = RunningPlan(c, 3, {"a2-w0", "a2-w1"}, 40, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  rec.cooldown_until["h1"] = kT0 + 200;
  const JobSettings s = Settings(2, 4);
  const Decision d = Decide(rec, c.Obs(kT0 + 1, plan), s);
  EXPECT_FALSE(d.stop) << "h1 is cooling down and the running generation needs no help. " << Names(d);
  EXPECT_EQ(CountEvents(d, "resize_requested"), 0);
  // After the cool-down (the generation still stepping) the same view does ask for a resize.
  MarkRunning(c, plan, 60, kT0 + 200);
  const Decision later = Decide(rec, c.Obs(kT0 + 201, plan), s);
  ASSERT_TRUE(later.stop) << Names(later);
  EXPECT_EQ(later.stop->reasons, kStopResize);
}

// ---- 8. The restore choice ---------------------------------------------------------------

// Generation 0 ended (a resize) with two idle workers holding replicas at `state_step`.
struct Ended {
  Cluster c;
  Plan plan;
  JobRecord rec;
  Ended(int64_t state_step, int64_t latest_checkpoint) {
    c.AddHost("a1", "h1", 2);
    plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, state_step, kT0 - 50);
    MarkIdle(c, "a1-w0", "stopped", state_step, kStopResize);
    MarkIdle(c, "a1-w1", "stopped", state_step, kStopResize);
    rec = RunningRecord(plan, kT0 - 50);
    rec.state = JobState::kResizing;
    rec.latest_checkpoint_step = latest_checkpoint;
  }
};

TEST(ElasticPolicyRestore, MemoryWhenDataParallelAndTheReplicaIsCurrent) {
  Ended e(20, 10);
  const Decision d = Decide(e.rec, e.c.Obs(kT0, e.plan), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kMemory);
  EXPECT_EQ(d.plan->restore.step, 20);
  EXPECT_EQ(d.plan->restore.source_rank, 0);
  Ended same(10, 10);
  const Decision d2 = Decide(same.rec, same.c.Obs(kT0, same.plan), Settings(1, 2));
  ASSERT_TRUE(d2.plan);
  EXPECT_EQ(d2.plan->restore.kind, RestoreKind::kMemory) << "a replica as new as the checkpoint";
  EXPECT_EQ(d2.plan->restore.step, 10);
}

TEST(ElasticPolicyRestore, EventsNameTheStepOnlyWhereThePlanKnowsIt) {
  Ended e(20, 10);
  Decision d = Decide(e.rec, e.c.Obs(kT0, e.plan), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(FindEvent(d, "generation_started")->fields["restore"],
            nlohmann::json({{"kind", "memory"}, {"source_rank", 0}, {"step", 20}}));
  EXPECT_THAT(FindEvent(d, "job_state")->fields["reason"].get<std::string>(),
              HasSubstr("(restore from memory of rank 0, step 20)"));

  Ended old(5, 10);  // the checkpoint is newer than the replicas
  d = Decide(old.rec, old.c.Obs(kT0, old.plan), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(FindEvent(d, "generation_started")->fields["restore"],
            nlohmann::json({{"kind", "checkpoint"}, {"latest_checkpoint_step", 10}}));
  EXPECT_THAT(FindEvent(d, "job_state")->fields["reason"].get<std::string>(),
              HasSubstr("(restore from the latest checkpoint; the newest known is step 10)"));
}

TEST(ElasticPolicyRestore, DescribeRestoreTakesAnyJson) {
  EXPECT_EQ(DescribeRestore(nlohmann::json(5)), "the latest checkpoint, if any");
  EXPECT_EQ(DescribeRestore({{"kind", "memory"}, {"step", "x"}}), "memory of rank -1, step -1");
  EXPECT_EQ(DescribeRestore({{"kind", "checkpoint"}, {"latest_checkpoint_step", 1.5}}), "the latest checkpoint, if any");
}

TEST(ElasticPolicyRestore, CheckpointWhenTheNewMeshShardsTheState) {
  Ended e(20, 10);
  JobSettings s = Settings(1, 2);
  s.mesh_for = [](int world) -> Result<Mesh> { return Mesh(1, world, 1); };
  Decision d = Decide(e.rec, e.c.Obs(kT0, e.plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->fsdp, 2);
  EXPECT_EQ(d.plan->data, 1);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
  EXPECT_EQ(d.plan->restore.step, 10);
  EXPECT_EQ(FindEvent(d, "generation_started")->fields["mesh"]["fsdp"], 2);

  s.mesh_for = [](int world) -> Result<Mesh> { return Mesh(1, 1, world); };
  d = Decide(e.rec, e.c.Obs(kT0, e.plan), s);
  ASSERT_TRUE(d.plan);
  EXPECT_EQ(d.plan->tensor, 2);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
}

TEST(ElasticPolicyRestore, CheckpointWhenTheReplicaIsOlderThanTheLatestCheckpoint) {
  Ended e(5, 10);
  Decision d = Decide(e.rec, e.c.Obs(kT0, e.plan), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
  EXPECT_EQ(d.plan->restore.step, 10);

  // A checkpoint a worker reports committing counts too.
  Ended e2(20, 10);
  e2.c.W("a1-w1").rec.checkpoint_step = 25;
  d = Decide(e2.rec, e2.c.Obs(kT0, e2.plan), Settings(1, 2));
  ASSERT_TRUE(d.plan);
  EXPECT_EQ(d.record.latest_checkpoint_step, 25);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
  EXPECT_EQ(d.plan->restore.step, 25);
}

TEST(ElasticPolicyRestore, CheckpointWhenNobodyHoldsAReplica) {
  Ended e(-1, 10);
  const Decision d = Decide(e.rec, e.c.Obs(kT0, e.plan), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
  EXPECT_EQ(d.plan->restore.step, 10);
}

// ---- 9. Host cool-down -------------------------------------------------------------------

// h1 and h2 with two workers each; generations 0 and 1 each lose a worker on h1 (the
// agent replaces it with a new idle worker). Returns the decision after the second.
Decision TwoFailuresOnH1(int min_workers, Cluster& c) {
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 2);
  JobSettings s = Settings(min_workers, 4);
  s.max_failures = 5;
  s.host_failure_threshold = 2;
  s.host_cooldown_seconds = 300;
  Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  EXPECT_TRUE(d.plan);
  if (!d.plan) return d;
  Plan plan = *d.plan;
  EXPECT_THAT(MemberIds(plan), ElementsAre("a1-w0", "a1-w1", "a2-w0", "a2-w1"));
  MarkRunning(c, plan, 5, kT0 + 1);

  MarkExited(c, "a1-w0", "failure", kT0 + 10);
  for (const char* id : {"a1-w1", "a2-w0", "a2-w1"}) MarkIdle(c, id, "failed", 5);
  c.AddWorker("a1-w2", "a1");
  d = Decide(d.record, c.Obs(kT0 + 11, plan), s);
  EXPECT_TRUE(d.plan) << Names(d);
  if (!d.plan) return d;
  EXPECT_EQ(CountEvents(d, "host_cooldown"), 0) << "one failure on h1 so far";
  EXPECT_EQ(d.record.host_failures["h1"].size(), 1u);
  plan = *d.plan;
  EXPECT_THAT(MemberIds(plan), ElementsAre("a1-w1", "a1-w2", "a2-w0", "a2-w1"));
  MarkRunning(c, plan, 6, kT0 + 12);

  MarkExited(c, "a1-w1", "failure", kT0 + 20);
  for (const char* id : {"a1-w2", "a2-w0", "a2-w1"}) MarkIdle(c, id, "failed", 6);
  c.AddWorker("a1-w3", "a1");
  return Decide(d.record, c.Obs(kT0 + 21, plan), s);
}

TEST(ElasticPolicyCooldown, TwoFailuresOnAHostCoolItDown) {
  Cluster c;
  const Decision d = TwoFailuresOnH1(2, c);
  ASSERT_EQ(CountEvents(d, "host_cooldown"), 1) << Names(d);
  EXPECT_EQ(FindEvent(d, "host_cooldown")->fields["host"], "h1");
  EXPECT_EQ(FindEvent(d, "host_cooldown")->fields["failures"], 2);
  EXPECT_EQ(d.record.cooldown_until.at("h1"), kT0 + 21 + 300);
  EXPECT_EQ(d.record.cooldown_until.count("h2"), 0u);
  EXPECT_EQ(d.record.failures, 2);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->generation, 2);
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a2-w0", "a2-w1")) << "h1's idle workers are avoided";
  EXPECT_THAT(MemberHosts(*d.plan), ElementsAre("h2", "h2"));
  EXPECT_EQ(CountEvents(d, "cooldown_overridden"), 0);
}

TEST(ElasticPolicyCooldown, CooledHostIsUsedWhenNothingElseRunsMinWorkers) {
  Cluster c;
  const Decision d = TwoFailuresOnH1(3, c);
  ASSERT_EQ(CountEvents(d, "host_cooldown"), 1) << Names(d);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->world, 4);
  EXPECT_THAT(MemberHosts(*d.plan), ElementsAre("h1", "h1", "h2", "h2"));
  EXPECT_EQ(CountEvents(d, "cooldown_overridden"), 1);
}

TEST(ElasticPolicyCooldown, FailuresFurtherApartThanTheWindowDoNotCoolDown) {
  // Two failed generations on h1, 400 s apart (host_cooldown_seconds = 300).
  Cluster c;
  c.AddHost("a1", "h1", 2);
  JobSettings s = Settings(1, 2);
  s.max_failures = 5;
  Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 5, kT0);
  JobRecord rec = RunningRecord(plan, kT0);
  rec.host_failures["h1"] = {kT0 - 400};
  MarkExited(c, "a1-w0", "failure", kT0 + 1);
  MarkIdle(c, "a1-w1", "failed", 5);
  const Decision d = Decide(rec, c.Obs(kT0 + 1, plan), s);
  EXPECT_EQ(CountEvents(d, "host_cooldown"), 0) << Names(d);
  EXPECT_EQ(d.record.host_failures.at("h1"), std::vector<double>{kT0 + 1}) << "the old one is forgotten";
  EXPECT_EQ(d.record.cooldown_until.count("h1"), 0u);
}

// ---- 10. Stragglers ---------------------------------------------------------------------

TEST(ElasticPolicyStraggler, KilledOnceAfterCollectiveTimeoutPlusGrace) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 1);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1", "a2-w0"}, 9, kT0 - 5);
  JobSettings s = Settings(1, 3);
  s.collective_timeout = 60;
  MarkExited(c, "a1-w0", "failure", kT0);
  MarkIdle(c, "a1-w1", "failed", 9);
  // a2-w0 is still "running" (stuck in a collective).
  Decision d = Decide(RunningRecord(plan, kT0 - 5), c.Obs(kT0, plan), s);
  EXPECT_TRUE(d.commands.empty());
  EXPECT_EQ(d.record.ending_since, kT0);
  d = Decide(d.record, c.Obs(kT0 + s.collective_timeout + kEndingGraceSeconds - 1, plan), s);
  EXPECT_TRUE(d.commands.empty()) << "not yet";
  EXPECT_FALSE(d.plan);

  d = Decide(d.record, c.Obs(kT0 + s.collective_timeout + kEndingGraceSeconds + 1, plan), s);
  ASSERT_EQ(d.commands.size(), 1u) << Names(d);
  EXPECT_EQ(d.commands[0].first, "a2");
  EXPECT_EQ(d.commands[0].second.action, CommandAction::kTerminate);
  EXPECT_EQ(d.commands[0].second.worker, "a2-w0");
  EXPECT_EQ(d.commands[0].second.requested_at, kT0 + s.collective_timeout + kEndingGraceSeconds + 1);
  EXPECT_EQ(CountEvents(d, "stragglers_killed"), 1);
  EXPECT_FALSE(d.plan);

  d = Decide(d.record, c.Obs(kT0 + 100, plan), s);
  EXPECT_TRUE(d.commands.empty()) << "once";
  EXPECT_EQ(CountEvents(d, "stragglers_killed"), 0);

  // The agent kills it (kind "ended"): the generation is over, one failure in all.
  MarkExited(c, "a2-w0", "ended", kT0 + 101, "was terminated as a straggler");
  d = Decide(d.record, c.Obs(kT0 + 102, plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.record.failures, 1);
  EXPECT_EQ(CountEvents(d, "worker_terminated"), 1);
  EXPECT_THAT(FindEvent(d, "generation_failed")->fields["reason"].get<std::string>(), HasSubstr("rank 0 "));
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w1"));
  EXPECT_EQ(d.record.host_failures.count("h2"), 0u) << "the straggler's host did not fail";
}

// ---- 11. The user's stop ------------------------------------------------------------------

TEST(ElasticPolicyUserStop, StopsTheGenerationThenTheJob) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 50, kT0);
  const JobSettings s = Settings(1, 2);
  Decision d = Decide(RunningRecord(plan, kT0), c.Obs(kT0 + 1, plan, /*stop=*/true), s);
  ASSERT_TRUE(d.stop) << Names(d);
  EXPECT_EQ(d.stop->generation, 0);
  EXPECT_EQ(d.stop->reasons, kStopUser);
  EXPECT_EQ(CountEvents(d, "stop_requested"), 1);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_FALSE(d.shutdown);
  EXPECT_FALSE(d.plan);

  d = Decide(d.record, c.Obs(kT0 + 2, plan, true), s);
  EXPECT_FALSE(d.stop) << "asked once";
  EXPECT_EQ(CountEvents(d, "stop_requested"), 0);

  MarkIdle(c, "a1-w0", "stopped", 51, kStopUser);
  MarkIdle(c, "a1-w1", "stopped", 51, kStopUser);
  c.W("a1-w0").rec.step = 51;
  c.W("a1-w1").rec.step = 51;
  d = Decide(d.record, c.Obs(kT0 + 3, plan, true), s);
  EXPECT_EQ(d.record.state, JobState::kStopped);
  EXPECT_TRUE(d.shutdown);
  EXPECT_FALSE(d.plan);
  EXPECT_EQ(d.record.failures, 0);
  EXPECT_EQ(d.record.ended_at, kT0 + 3);
  EXPECT_THAT(d.record.reason, HasSubstr("elastrain stop"));
  EXPECT_THAT(d.record.reason, HasSubstr("51"));
  EXPECT_THAT(Transitions(d), ElementsAre("RUNNING->STOPPED"));
}

TEST(ElasticPolicyUserStop, StopBetweenGenerationsEndsTheJob) {
  Cluster c;
  c.AddHost("a1", "h1", 1);
  JobRecord rec;
  rec.state = JobState::kRecovering;
  rec.generation = 2;
  const Decision d = Decide(rec, c.Obs(kT0, std::nullopt, true), Settings(1, 1));
  EXPECT_EQ(d.record.state, JobState::kStopped);
  EXPECT_TRUE(d.shutdown);
  EXPECT_FALSE(d.plan);
}

TEST(ElasticPolicyUserStop, UserStopAndResizeShareOneRequest) {
  TwoRunningTwoIdle f;
  const JobSettings s = Settings(1, 4);
  Decision d = Decide(f.rec, f.c.Obs(kT0 + 1, f.plan), s);
  ASSERT_TRUE(d.stop);
  ASSERT_EQ(d.stop->reasons, kStopResize);
  d = Decide(d.record, f.c.Obs(kT0 + 2, f.plan, true), s);
  ASSERT_TRUE(d.stop) << Names(d);
  EXPECT_EQ(d.stop->reasons, kStopResize | kStopUser) << "the rewritten request keeps both reasons";
}

// ---- 12. Completion -----------------------------------------------------------------------

TEST(ElasticPolicyCompletion, AllCompletedSucceeds) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 100, kT0);
  const JobSettings s = Settings(1, 2);

  // One done, the other still finishing its last step: wait.
  MarkIdle(c, "a1-w0", "completed", 100);
  Decision d = Decide(RunningRecord(plan, kT0), c.Obs(kT0 + 1, plan), s);
  EXPECT_EQ(d.record.state, JobState::kRunning);
  EXPECT_FALSE(d.shutdown);
  EXPECT_EQ(d.record.ending_since, 0) << "a completed member does not end the generation";

  MarkIdle(c, "a1-w1", "completed", 100);
  d = Decide(d.record, c.Obs(kT0 + 2, plan), s);
  EXPECT_EQ(d.record.state, JobState::kSucceeded);
  EXPECT_TRUE(d.shutdown);
  EXPECT_FALSE(d.plan);
  EXPECT_EQ(d.record.step, 100);
  EXPECT_EQ(d.record.ended_at, kT0 + 2);
  EXPECT_THAT(d.record.reason, HasSubstr("100 steps"));
  EXPECT_THAT(Transitions(d), ElementsAre("RUNNING->SUCCEEDED"));
  EXPECT_EQ(d.record.failures, 0);
}

// ---- 13. Placement ------------------------------------------------------------------------

Cluster TwoByTwo() {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  c.AddHost("a2", "h2", 2);
  return c;
}

TEST(ElasticPolicyPlacement, PackFillsOneAgentSpreadUsesBoth) {
  const Cluster c = TwoByTwo();
  JobSettings s = Settings(1, 2);
  s.placement = PlacementStrategy::kPack;
  Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_THAT(MemberHosts(*d.plan), ElementsAre("h1", "h1"));
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a1-w1"));

  s.placement = PlacementStrategy::kSpread;
  d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_THAT(MemberHosts(*d.plan), ElementsAre("h1", "h2"));
  EXPECT_THAT(MemberIds(*d.plan), ElementsAre("a1-w0", "a2-w0"));
}

TEST(ElasticPolicyPlacement, PackPrefersTheAgentWithMostIdleWorkers) {
  Cluster c;
  c.AddHost("a1", "h1", 1);
  c.AddHost("a2", "h2", 2);
  const Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), Settings(1, 2));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_THAT(MemberHosts(*d.plan), ElementsAre("h2", "h2"));
}

TEST(ElasticPolicyPlacement, PreemptingAgentsAndBusyWorkersAreNotCandidates) {
  Cluster c = TwoByTwo();
  c.agents[0].preempting = true;
  c.W("a2-w1").rec.phase = WorkerPhase::kStarting;
  // The first call begins the startup grace (a2-w1 is starting); the second is past it.
  const Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), Settings(1, 4));
  EXPECT_FALSE(d.plan);
  const Decision d2 = Decide(d.record, c.Obs(kT0 + kStartupGraceSeconds, std::nullopt), Settings(1, 4));
  ASSERT_TRUE(d2.plan) << Names(d2);
  EXPECT_THAT(MemberIds(*d2.plan), ElementsAre("a2-w0"));
}

// ---- 14. A stalled generation ---------------------------------------------------------------

TEST(ElasticPolicyStall, WholeGenerationWithoutStepsIsHung) {
  Cluster c;
  c.AddHost("a1", "h1", 1);
  c.AddHost("a2", "h2", 1);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a2-w0"}, 17, kT0);
  c.W("a2-w0").rec.last_step_time = kT0 + 5;  // the newest step
  JobSettings s = Settings(1, 2);
  s.heartbeat_timeout = 60;
  const JobRecord rec = RunningRecord(plan, kT0);

  Decision d = Decide(rec, c.Obs(kT0 + 5 + 2 * s.heartbeat_timeout - 1, plan), s);
  EXPECT_TRUE(d.commands.empty()) << Names(d);
  EXPECT_EQ(CountEvents(d, "generation_stalled"), 0);

  d = Decide(d.record, c.Obs(kT0 + 5 + 2 * s.heartbeat_timeout + 1, plan), s);
  ASSERT_EQ(d.commands.size(), 2u) << Names(d);
  EXPECT_EQ(d.commands[0].first, "a1");
  EXPECT_EQ(d.commands[0].second.action, CommandAction::kHung);
  EXPECT_EQ(d.commands[0].second.worker, "a1-w0");
  EXPECT_EQ(d.commands[1].first, "a2");
  EXPECT_EQ(d.commands[1].second.action, CommandAction::kHung);
  EXPECT_EQ(d.commands[1].second.worker, "a2-w0");
  ASSERT_EQ(CountEvents(d, "generation_stalled"), 1);
  EXPECT_EQ(FindEvent(d, "generation_stalled")->fields["generation"], 0);
  EXPECT_FALSE(d.stop);

  d = Decide(d.record, c.Obs(kT0 + 500, plan), s);
  EXPECT_TRUE(d.commands.empty()) << "once";
  EXPECT_EQ(CountEvents(d, "generation_stalled"), 0);
}

TEST(ElasticPolicyStall, NotHungOutsideTheTrainingLoopOrBeforeTheFirstStep) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 17, kT0);
  const JobSettings s = Settings(1, 2);
  const double late = kT0 + 10 * s.heartbeat_timeout;

  c.W("a1-w1").rec.train_phase = TrainPhase::kCheckpoint;  // a long save is no stall
  Decision d = Decide(RunningRecord(plan, kT0), c.Obs(late, plan), s);
  EXPECT_TRUE(d.commands.empty()) << Names(d);

  c.W("a1-w1").rec.train_phase = TrainPhase::kTrain;
  c.W("a1-w1").rec.first_step_time = 0;  // still compiling its first step
  d = Decide(RunningRecord(plan, kT0), c.Obs(late, plan), s);
  EXPECT_TRUE(d.commands.empty()) << Names(d);
}

// ---- 15. fail_at_step ---------------------------------------------------------------------

TEST(ElasticPolicyInjection, ArmedUntilAGenerationReachesTheStep) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  JobSettings s = Settings(1, 2);
  s.fail_at_step = 5;
  Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_TRUE(d.plan->inject_failure);
  EXPECT_TRUE(d.record.inject_armed);
  Plan plan = *d.plan;

  // Preempted at step 3: still armed for the next generation.
  MarkRunning(c, plan, 3, kT0 + 1);
  MarkIdle(c, "a1-w0", "stopped", 3, kStopPreemption);
  MarkIdle(c, "a1-w1", "stopped", 3, kStopPreemption);
  d = Decide(d.record, c.Obs(kT0 + 2, plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_TRUE(d.plan->inject_failure) << "step 3 < fail_at_step 5";
  EXPECT_TRUE(d.record.inject_armed);
  plan = *d.plan;

  // The injected failure fires at step 5.
  MarkRunning(c, plan, 5, kT0 + 3);
  MarkExited(c, "a1-w0", "failure", kT0 + 4, "exited with code 1: injected failure at step 5");
  MarkIdle(c, "a1-w1", "failed", 5);
  c.AddWorker("a1-w2", "a1");
  d = Decide(d.record, c.Obs(kT0 + 5, plan), s);
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_FALSE(d.plan->inject_failure);
  EXPECT_FALSE(d.record.inject_armed);
  EXPECT_EQ(d.record.failures, 1);
}

TEST(ElasticPolicyInjection, NeverArmedWithoutFailAtStep) {
  Cluster c;
  c.AddHost("a1", "h1", 1);
  const Decision d = Decide(JobRecord{}, c.Obs(kT0, std::nullopt), Settings(1, 1));
  ASSERT_TRUE(d.plan);
  EXPECT_FALSE(d.plan->inject_failure);
}

// ---- Odds and ends ------------------------------------------------------------------------

TEST(ElasticPolicyMisc, MissingPlanIsPlannedAgain) {
  Cluster c;
  c.AddHost("a1", "h1", 1);
  JobRecord rec;
  rec.state = JobState::kRunning;
  rec.generation = 4;
  Decision d = Decide(rec, c.Obs(kT0, std::nullopt), Settings(1, 1));
  EXPECT_EQ(d.record.state, JobState::kRecovering);
  EXPECT_THAT(d.record.reason, HasSubstr("generation 4"));
  d = Decide(d.record, c.Obs(kT0 + 1, std::nullopt), Settings(1, 1));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->generation, 5);
  EXPECT_EQ(d.record.failures, 0);
}

TEST(ElasticPolicyMisc, UnknownStateInTheStoreIsRefusedWhenRead) {
  // A record whose state this version does not know (or a hostile one) is refused when
  // read, naming the record and the states expected; the state travels by name.
  JobRecord rec;
  Status st = FromJson(R"({"job_id":"j","state":"BOGUS"})", &rec);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job state"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("BOGUS"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("WAITING_FOR_RESOURCES"), std::string::npos) << st.message();
  EXPECT_FALSE(FromJson(R"({"job_id":"j","state":7})", &rec).ok());
  rec.state = JobState::kWaitingForResources;
  JobRecord back;
  ASSERT_TRUE(FromJson(ToJson(rec), &back).ok());
  EXPECT_EQ(back.state, JobState::kWaitingForResources);
  EXPECT_NE(ToJson(rec).find(R"("state":"WAITING_FOR_RESOURCES")"), std::string::npos);
}

TEST(ElasticPolicyMisc, FirstStepIsNotedOnce) {
  Cluster c;
  c.AddHost("a1", "h1", 2);
  const Plan plan = RunningPlan(c, 0, {"a1-w0", "a1-w1"}, 1, kT0);
  c.W("a1-w1").rec.first_step_time = kT0 - 1;
  c.W("a1-w1").rec.step = 2;
  Decision d = Decide(RunningRecord(plan, kT0), c.Obs(kT0 + 1, plan), Settings(1, 2));
  ASSERT_EQ(CountEvents(d, "generation_first_step"), 1) << Names(d);
  EXPECT_EQ(FindEvent(d, "generation_first_step")->fields["first_step_time"], kT0 - 1);
  EXPECT_EQ(d.record.step, 2);
  EXPECT_TRUE(d.record.first_step_noted);
  d = Decide(d.record, c.Obs(kT0 + 2, plan), Settings(1, 2));
  EXPECT_EQ(CountEvents(d, "generation_first_step"), 0);
}

}  // namespace
}  // namespace elastrain
