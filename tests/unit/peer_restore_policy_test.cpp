// The controller's restore from peers' RAM (elastic/policy.h, the RAM tier of issue #18):
// a sharded generation loses a rank, the survivors report the shard copies they hold,
// and the next plan restores from them or falls back to the checkpoint saying why. Also
// the agent's check of such a plan (elastic/fencing.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/mesh.h"
#include "elastic/fencing.h"
#include "elastic/policy.h"
#include "policy_test_builders.h"
#include "wire/protocol.h"

namespace elastrain {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::elastrain::policy_test;  // NOLINT: the builders are the tests' vocabulary

constexpr int64_t kCheckpointStep = 5;
constexpr int64_t kCopyStep = 8;

JobSettings ShardedSettings(bool ram_tier) {
  JobSettings s = Settings(2, 4);
  s.mesh_for = [](int world) -> Result<Mesh> { return Mesh(1, world, 1); };
  s.ram_tier = ram_tier;
  return s;
}

// Generation `gen`, fsdp=4 over four workers of a1 with ranks not in id order (old rank r
// is kOrder[r]); old rank 1 (a1-w0) is killed and the survivors have gone idle. Each
// survivor holds its own shard and, as its one buddy copy, the shard of the rank before
// it (rank r's copy lives at rank r+1), all at kCopyStep: shard 1's only copy is at old
// rank 2 (a1-w2).
struct ShardedFailure {
  static constexpr const char* kOrder[4] = {"a1-w3", "a1-w0", "a1-w2", "a1-w1"};
  Cluster c;
  Plan plan;
  JobRecord rec;
  explicit ShardedFailure(int64_t gen = 0) {
    c.AddHost("a1", "h1", 4);
    plan = RunningPlan(c, gen, {kOrder[0], kOrder[1], kOrder[2], kOrder[3]}, kCopyStep, kT0 - 10);
    plan.data = 1;
    plan.fsdp = 4;
    rec = RunningRecord(plan, kT0 - 10);
    rec.latest_checkpoint_step = kCheckpointStep;
    MarkExited(c, "a1-w0", "failure", kT0 + 1);
    for (int old_rank : {0, 2, 3}) {
      MarkIdle(c, kOrder[old_rank], "failed");
      WorkerRecord& w = c.W(kOrder[old_rank]).rec;
      w.copies_generation = gen;
      w.copies = {{old_rank, kCopyStep}, {(old_rank + 3) % 4, kCopyStep}};
    }
  }
  WorkerRecord& Holder(int old_rank) { return c.W(kOrder[old_rank]).rec; }
  Decision Next(const JobSettings& s) { return Decide(rec, c.Obs(kT0 + 2, plan), s); }
};

TEST(PeerRestorePolicy, ASurvivingCopyOfEveryShardRestoresFromPeersOnTheNewRanks) {
  ShardedFailure f;
  const Decision d = f.Next(ShardedSettings(true));
  ASSERT_TRUE(d.plan) << Names(d);
  const Plan& p = *d.plan;
  // Survivors keep their old rank order: old ranks 0, 2, 3 -> new 0, 1, 2.
  ASSERT_THAT(MemberIds(p), ElementsAre("a1-w3", "a1-w2", "a1-w1"));
  EXPECT_EQ(p.fsdp, 3);
  const RestorePlan& r = p.restore;
  EXPECT_EQ(r.kind, RestoreKind::kPeers);
  EXPECT_EQ(r.step, kCopyStep);
  EXPECT_EQ(r.old_generation, 0);
  EXPECT_EQ(r.old_fsdp, 4);
  EXPECT_EQ(r.old_tensor, 1);
  // Shards 0, 2, 3 from their owners (new ranks 0, 1, 2); the dead rank 1's shard from
  // its buddy, old rank 2, now rank 1.
  EXPECT_THAT(r.sources, ElementsAre(0, 1, 1, 2));
  EXPECT_THAT(r.why, HasSubstr("every shard of step 8 survives in memory (1 of 4 from a buddy's copy)"));
  EXPECT_EQ(d.record.failures, 1);
  EXPECT_EQ(d.record.covered_failures, 1);
  EXPECT_EQ(p.covered_failures, 1);
  const auto started = FindEvent(d, "generation_started");
  ASSERT_TRUE(started) << Names(d);
  EXPECT_EQ(started->fields["restore"]["kind"], "peers");
  EXPECT_EQ(started->fields["restore"]["why"], r.why);
}

TEST(PeerRestorePolicy, AShardWithNoSurvivingCopyFallsBackToTheCheckpointSayingWhich) {
  ShardedFailure f;
  f.Holder(2).copies = {{2, kCopyStep}};  // old rank 2 lost its copy of shard 1
  const Decision d = f.Next(ShardedSettings(true));
  ASSERT_TRUE(d.plan) << Names(d);
  const RestorePlan& r = d.plan->restore;
  EXPECT_EQ(r.kind, RestoreKind::kCheckpoint);
  EXPECT_EQ(r.step, kCheckpointStep);
  EXPECT_THAT(r.why, HasSubstr("no surviving copy of shard 1"));
  EXPECT_TRUE(r.sources.empty());
  EXPECT_EQ(d.record.failures, 1);
  EXPECT_EQ(d.record.covered_failures, 0);
  EXPECT_EQ(d.plan->covered_failures, 0);
  EXPECT_EQ(FindEvent(d, "generation_started")->fields["restore"]["why"], r.why);
}

TEST(PeerRestorePolicy, WithoutTheRamTierTheCheckpointIsRestoredAndNoReasonGiven) {
  ShardedFailure f;
  const Decision d = f.Next(ShardedSettings(false));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
  EXPECT_EQ(d.plan->restore.step, kCheckpointStep);
  EXPECT_TRUE(d.plan->restore.why.empty()) << d.plan->restore.why;
  EXPECT_EQ(d.record.covered_failures, 0);
  EXPECT_FALSE(FindEvent(d, "generation_started")->fields["restore"].contains("why"));
}

// Copies reported for an older generation than the one that failed hold shards of another
// layout (or another step of training): they count for nothing.
TEST(PeerRestorePolicy, CopiesOfAStaleGenerationAreIgnored) {
  ShardedFailure f(/*gen=*/3);
  f.Holder(2).copies_generation = 2;  // the only copy of shard 1, but of generation 2
  Decision d = f.Next(ShardedSettings(true));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
  EXPECT_THAT(d.plan->restore.why, HasSubstr("no surviving copy of shard 1"));
  EXPECT_EQ(d.record.covered_failures, 0);

  f.Holder(2).copies_generation = 3;  // the same report, of the generation that failed
  d = f.Next(ShardedSettings(true));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kPeers);
  EXPECT_EQ(d.plan->restore.old_generation, 3);
}

// A report is a store record: shard ids outside the old mesh and negative steps claim
// nothing (and crash nothing); the one real copy of shard 1 is still found.
TEST(PeerRestorePolicy, HostileCopiesInAReportClaimNothing) {
  ShardedFailure f;
  f.Holder(2).copies = {{2, kCopyStep}, {-1, kCopyStep}, {4, kCopyStep}, {1 << 30, kCopyStep}, {1, -7}};
  Decision d = f.Next(ShardedSettings(true));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kCheckpoint);
  EXPECT_THAT(d.plan->restore.why, HasSubstr("no surviving copy of shard 1"));

  f.Holder(2).copies.push_back({1, kCopyStep});
  d = f.Next(ShardedSettings(true));
  ASSERT_TRUE(d.plan) << Names(d);
  EXPECT_EQ(d.plan->restore.kind, RestoreKind::kPeers);
  ASSERT_EQ(d.plan->restore.sources.size(), 4u);
}

// ---- The agent's check (elastic/fencing.h) ---------------------------------------------

// A valid peer restore plan of generation 1 (world 3, fsdp 3) after an fsdp=4 generation.
Plan PeersPlan() {
  Plan p;
  p.job_id = "job1";
  p.generation = 1;
  p.world = 3;
  p.fsdp = 3;
  p.rendezvous = RendezvousAddress::File("/runs/job1/rendezvous/job1");
  for (int r = 0; r < 3; ++r) p.members.push_back({r, "a1-w" + std::to_string(r), "a1", "h1", 100 + r});
  p.restore.kind = RestoreKind::kPeers;
  p.restore.step = kCopyStep;
  p.restore.old_generation = 0;
  p.restore.old_fsdp = 4;
  p.restore.old_tensor = 1;
  p.restore.sources = {0, 1, 1, 2};
  return p;
}

Status Check(const Plan& p) {
  const JobSpec job{"job1", "model_name: tiny\n", "/runs/job1", 1};
  return CheckPlan(p, job, "memory://", "a1", {"a1-w0", "a1-w1", "a1-w2"});
}

TEST(PeerRestoreFencing, APeersPlanWithWrongSourcesIsRefused) {
  ASSERT_TRUE(Check(PeersPlan()).ok()) << Check(PeersPlan()).ToString();
  Plan p = PeersPlan();
  p.restore.sources = {0, 1, 1};  // three sources for four shards
  EXPECT_EQ(Check(p).code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(Check(p).message(), HasSubstr("3 sources for 4 shards"));
  p.restore.sources = {0, 1, 1, 2, 0};
  EXPECT_EQ(Check(p).code(), StatusCode::kPermissionDenied);
  p = PeersPlan();
  p.restore.sources = {0, 1, 3, 2};  // rank 3 of a world of 3
  EXPECT_THAT(Check(p).message(), HasSubstr("peer restore source rank 3 is not a rank"));
  p.restore.sources = {0, -1, 1, 2};
  EXPECT_THAT(Check(p).message(), HasSubstr("peer restore source rank -1 is not a rank"));
  p = PeersPlan();
  p.restore.old_tensor = 0;
  EXPECT_EQ(Check(p).code(), StatusCode::kPermissionDenied);
  p = PeersPlan();
  p.restore.old_fsdp = 1 << 20;  // more shards than any job
  p.restore.old_tensor = 2;
  EXPECT_EQ(Check(p).code(), StatusCode::kPermissionDenied);
  p = PeersPlan();
  p.restore.old_generation = -1;
  EXPECT_EQ(Check(p).code(), StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace elastrain
