// The worker's fencing check (train/worker.h StillCurrent): a write is allowed only while
// the job's plan in the store is this generation of this job. The plan record is read
// back, not trusted: missing, damaged or foreign records refuse.
#include <gtest/gtest.h>

#include <string>

#include "test_dirs.h"
#include "store/signed_records.h"
#include "store/store.h"
#include "train/worker.h"
#include "wire/protocol.h"

namespace elastrain {
namespace {

const RendezvousAddress kJob = RendezvousAddress::Etcd("etcd://10.0.0.1:2379", "elastrain/rdv/job-1");

Plan PlanOf(int64_t generation, RendezvousAddress rendezvous = kJob) {
  Plan p;
  p.job_id = "job-1";
  p.generation = generation;
  p.world = 1;
  p.members = {PlanMember{}};
  p.rendezvous = std::move(rendezvous);
  return p;
}

TEST(StillCurrent, OnlyThePlansOwnGenerationMayWrite) {
  auto store = MakeMemoryStore();
  const auto check = StillCurrent(store, kJob, 3);
  EXPECT_EQ(check().code(), StatusCode::kFailedPrecondition) << "no plan at all";
  ASSERT_TRUE(store->Put(keys::JobPlan(), ToJson(PlanOf(3))).ok());
  EXPECT_TRUE(check().ok());
  ASSERT_TRUE(store->Put(keys::JobPlan(), ToJson(PlanOf(4))).ok());
  const Status st = check();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("the job is at generation 4"), std::string::npos) << st.message();
}

TEST(StillCurrent, HostilePlanRecordsRefuse) {
  auto store = MakeMemoryStore();
  const auto check = StillCurrent(store, kJob, 3);
  for (const std::string& record :
       {std::string("not json"), std::string("{\"generation\": \"3\"}"), std::string("[]"), std::string(1 << 16, '{'),
        std::string("{\"generation\": 3}"), ToJson(PlanOf(3, RendezvousAddress::Etcd("etcd://10.0.0.1:2379", "other")))}) {
    ASSERT_TRUE(store->Put(keys::JobPlan(), record).ok());
    EXPECT_EQ(check().code(), StatusCode::kFailedPrecondition) << record.substr(0, 80);
  }
}

TEST(StillCurrent, WithTheHeadsKeyOnlyASignedPlanNotOlderThanTheLastConfirms) {
  ScopedTempDir dir{"still_current"};
  auto head = SigningKey::LoadOrCreate(dir.path() + "/head.key");
  ASSERT_TRUE(head.ok()) << head.status().message();
  auto pub = VerifyKey::Load(dir.path() + "/head.key.pub");
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  auto store = MakeMemoryStore();
  const auto check = StillCurrent(store, kJob, 3, pub.value());
  auto signed_plan = [&](int64_t gen, double at) {
    auto v = SignRecord(*head.value(), keys::JobPlan(), ToJson(PlanOf(gen)), at);
    EXPECT_TRUE(v.ok());
    return v.value();
  };
  // Unsigned (written with an etcd credential alone): refused, naming why.
  ASSERT_TRUE(store->Put(keys::JobPlan(), ToJson(PlanOf(3))).ok());
  Status st = check();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("the job's plan is refused"), std::string::npos) << st.message();
  // Signed by the head: confirms.
  const std::string g3_old = signed_plan(3, 1000), g3_new = signed_plan(3, 2000);
  ASSERT_TRUE(store->Put(keys::JobPlan(), g3_new).ok());
  EXPECT_TRUE(check().ok());
  // An older record of the head's put back: a replay.
  ASSERT_TRUE(store->Put(keys::JobPlan(), g3_old).ok());
  st = check();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("a replay"), std::string::npos) << st.message();
  // Signed by another key: refused.
  auto other = SigningKey::LoadOrCreate(dir.path() + "/other.key");
  ASSERT_TRUE(other.ok());
  auto forged = SignRecord(*other.value(), keys::JobPlan(), ToJson(PlanOf(3)), 3000);
  ASSERT_TRUE(forged.ok());
  ASSERT_TRUE(store->Put(keys::JobPlan(), forged.value()).ok());
  EXPECT_EQ(check().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace elastrain
