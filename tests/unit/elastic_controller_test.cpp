// The controller's executor against an in-memory store (no processes): what it writes
// while nothing happens. A controller that rewrites the job record on every decision
// wakes itself (its own write moves the revision it waits on) and every agent: a spin
// that cost two thirds of a core (issue 20). Counted, not timed. And a submission that
// lands between the controller's reads of the spec and the record. Two heads: the
// standby takes over and the old leader is fenced out (issue 36).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "common/files.h"
#include "elastic/controller.h"
#include "elastic/leadership.h"
#include "jobctl/job_control.h"
#include "store/store.h"
#include "test_dirs.h"
#include "test_wait.h"
#include "wire/job_state.h"

namespace elastrain {
namespace {

using std::chrono::milliseconds;

// A memory store that counts the job record's puts and the waits, and how many of the
// waits a change (rather than the timeout) ended.
class CountingStore : public ForwardingStore {
 public:
  CountingStore() : ForwardingStore(MakeMemoryStore()) {}
  Result<int64_t> Put(const std::string& key, const std::string& value, LeaseId lease) override {
    if (key == keys::JobRecord()) ++record_puts;
    return ForwardingStore::Put(key, value, lease);
  }
  Result<bool> PutIf(const std::vector<StoreGuard>& guards, const std::string& key, const std::string& value,
                     LeaseId lease) override {
    if (key == keys::JobRecord()) ++record_puts;
    return ForwardingStore::PutIf(guards, key, value, lease);
  }
  Result<int64_t> WaitForChange(int64_t after, milliseconds timeout) override {
    auto r = ForwardingStore::WaitForChange(after, timeout);
    if (r.ok() && r.value() > after) ++waits_woken;
    ++waits;
    return r;
  }

  std::atomic<int> record_puts{0}, waits{0}, waits_woken{0};
};

std::optional<JobRecord> RecordIn(Store& store) {
  auto kv = store.Get(keys::JobRecord());
  if (!kv.ok() || !kv.value()) return std::nullopt;
  JobRecord r;
  if (!FromJson(kv.value()->value, &r).ok()) return std::nullopt;
  return r;
}

JobState StateIn(Store& store) {
  auto r = RecordIn(store);
  return r ? r->state : JobState::kPending;
}

// A job of exactly 2 workers, its outputs in `dir`.
TrainConfig TwoWorkerJob(const ScopedTempDir& dir) {
  TrainConfig cfg;
  cfg.base_output_directory = dir.path();
  cfg.num_workers_spec = "2";
  cfg.min_workers = cfg.max_workers = 2;
  return cfg;
}

TEST(ControllerTest, AQuietJobIsNotRewrittenAndDoesNotWakeTheController) {
  auto store = std::make_shared<CountingStore>();
  ScopedTempDir dir("controller_quiet");
  const TrainConfig cfg = TwoWorkerJob(dir);
  ASSERT_TRUE(SubmitJob(*store, cfg).ok());

  // No agent ever registers: the job waits for resources, and nothing changes.
  ControllerOptions opt;
  opt.tick = milliseconds(1);  // many quiet decisions in little time
  Controller controller(store, opt);
  std::atomic<bool> stop{false};
  std::thread t([&] { (void)controller.RunJob(stop); });
  EXPECT_TRUE(WaitUntil([&] { return StateIn(*store) == JobState::kWaitingForResources; }));

  const int puts = store->record_puts, woken = store->waits_woken, waits = store->waits;
  EXPECT_GE(puts, 1) << "the record's writes are not counted";
  EXPECT_TRUE(WaitUntil([&] { return store->waits >= waits + 50; }));
  stop = true;
  t.join();
  // 50 decisions, each of which stamped a new updated_at, and not one write or wake-up.
  EXPECT_EQ(store->record_puts, puts);
  EXPECT_EQ(store->waits_woken, woken);
}

// Submits `next` (once) right after the controller's first read of the spec: the
// controller then holds the ended job's spec and reads the record after the submission.
class SubmitAfterSpecRead : public CountingStore {
 public:
  Result<std::optional<KeyValue>> Get(const std::string& key) override {
    auto r = CountingStore::Get(key);
    if (key == keys::JobSpec() && next && !submitted.exchange(true)) submitted_spec = SubmitJob(*this, *next);
    return r;
  }
  std::optional<TrainConfig> next;
  std::atomic<bool> submitted{false};
  Result<JobSpec> submitted_spec = Status::Unavailable("not yet");
};

TEST(ControllerTest, ASubmissionBetweenItsReadsNeverRestartsTheEndedJob) {
  auto store = std::make_shared<SubmitAfterSpecRead>();
  ScopedTempDir dir("controller_submit_race");
  TrainConfig cfg = TwoWorkerJob(dir);
  cfg.run_name = "ended";
  auto ended = SubmitJob(*store, cfg);
  ASSERT_TRUE(ended.ok()) << ended.status().message();
  JobRecord done;
  done.job_id = ended->job_id;
  done.state = JobState::kSucceeded;
  ASSERT_TRUE(store->Put(keys::JobRecord(), ToJson(done), 0).ok());
  cfg.run_name = "next";
  store->next = cfg;

  Controller controller(store, ControllerOptions{});
  std::atomic<bool> stop{false};
  std::optional<JobRecord> seen_running_ended;
  std::thread t([&] { (void)controller.RunJob(stop); });
  // The controller takes up the new job (no agents: it waits for resources), and the
  // ended job's record is never replaced by a running one.
  EXPECT_TRUE(WaitUntil([&] {
    auto r = RecordIn(*store);
    if (r && r->job_id == ended->job_id && !IsTerminal(r->state)) seen_running_ended = r;
    return store->submitted_spec.ok() && r && r->job_id == store->submitted_spec->job_id;
  }));
  stop = true;
  t.join();
  ASSERT_TRUE(store->submitted_spec.ok()) << store->submitted_spec.status().message();
  EXPECT_FALSE(seen_running_ended) << "the ended job " << ended->job_id << " was started again";
  auto last = RecordIn(*store);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->job_id, store->submitted_spec->job_id);
  EXPECT_EQ(last->state, JobState::kWaitingForResources);
}

// Two heads on one store (issue 36): the second stands by while the first leads; when
// the first stops renewing (cut off), the second takes the job over within the lease and
// says so in the events, and the first, fenced, writes nothing more: RunJob returns
// kLostLead and none of its guarded writes lands.
class SilencedStore : public ForwardingStore {
 public:
  explicit SilencedStore(std::shared_ptr<Store> inner) : ForwardingStore(std::move(inner)) {}
  std::atomic<bool> cut{false};           // renewals fail as an unreachable store's would
  std::atomic<bool> another_leads{false};  // set once another head holds the key
  std::atomic<int> landed_after_takeover{0};
  Status KeepAlive(LeaseId lease) override {
    if (cut) return Status::Unavailable("cut off");
    return ForwardingStore::KeepAlive(lease);
  }
  Result<bool> PutIf(const std::vector<StoreGuard>& guards, const std::string& key, const std::string& value,
                     LeaseId lease) override {
    auto r = ForwardingStore::PutIf(guards, key, value, lease);
    if (another_leads && r.ok() && r.value()) ++landed_after_takeover;
    return r;
  }
};

TEST(ControllerTest, AStandbyHeadTakesOverAndTheOldLeaderIsFencedOut) {
  auto shared = MakeMemoryStore();
  auto first_store = std::make_shared<SilencedStore>(shared);
  ScopedTempDir dir("controller_two_heads");
  const TrainConfig cfg = TwoWorkerJob(dir);
  auto spec = SubmitJob(*shared, cfg);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ControllerOptions a, b;
  a.leader_ttl = b.leader_ttl = milliseconds(600);
  a.tick = b.tick = milliseconds(20);
  a.head_id = "h1:1";
  b.head_id = "h2:2";
  a.announce_lead = b.announce_lead = true;
  Controller first(first_store, a), second(shared, b);
  std::atomic<bool> stop{false};
  Status first_ended;
  std::thread t1([&] { first_ended = first.RunJob(stop).status(); });
  ASSERT_TRUE(WaitUntil([&] {
    auto r = RecordIn(*shared);
    return r && r->leader == "h1:1" && r->state == JobState::kWaitingForResources;
  }));
  std::thread t2([&] { (void)second.RunJob(stop); });
  std::this_thread::sleep_for(milliseconds(1500));  // two leases: the first keeps the lead
  EXPECT_EQ(RecordIn(*shared)->leader, "h1:1");

  const auto cut_at = std::chrono::steady_clock::now();
  first_store->cut = true;
  ASSERT_TRUE(WaitUntil([&] { auto r = RecordIn(*shared); return r && r->leader == "h2:2"; }));
  first_store->another_leads = true;
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count();
  EXPECT_LT(took, 0.6 + 1.0) << "the standby took over after " << took << " s (lease 0.6 s)";
  t1.join();  // the first returns once its lease ran out unrenewed
  EXPECT_EQ(first_ended.code(), StatusCode::kFailedPrecondition) << first_ended.message();
  EXPECT_NE(first_ended.message().find(kLostLead), std::string::npos) << first_ended.message();
  EXPECT_EQ(first_store->landed_after_takeover, 0);
  stop = true;
  t2.join();
  auto events = ReadFile(spec->run_dir + "/events.jsonl");
  ASSERT_TRUE(events.ok());
  EXPECT_NE(events->find("\"event\":\"head_elected\""), std::string::npos) << *events;
  EXPECT_NE(events->find("\"previous\":\"h1:1\""), std::string::npos) << *events;
  EXPECT_NE(events->find("\"event\":\"head_lost\""), std::string::npos) << *events;
}

// A leader's writes are guarded by its key: once the key is another head's, a write of
// the old leader fails and Verify says the lead is lost.
TEST(Leadership, AWriteOfAHeadWhoseKeyIsGoneDoesNotLand) {
  auto store = MakeMemoryStore();
  HeadRecord me;
  me.id = "h1:1";
  Leadership lead(store, me, milliseconds(5000));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(lead.Acquire(stop).ok());
  auto put = store->PutIf({lead.guard()}, "elastrain/x", "1");
  ASSERT_TRUE(put.ok() && put.value());
  // Another head's record where ours was (our lease revoked under us).
  ASSERT_TRUE(store->Delete(keys::Head()).ok());
  ASSERT_TRUE(store->Put(keys::Head(), "{\"id\":\"h2:2\"}").ok());
  put = store->PutIf({lead.guard()}, "elastrain/x", "2");
  ASSERT_TRUE(put.ok());
  EXPECT_FALSE(put.value());
  const Status st = lead.Verify();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.message();
  EXPECT_FALSE(lead.held());
  EXPECT_EQ(store->Get("elastrain/x").value()->value, "1");
}

// Within its lease a leader that cannot reach the store keeps the lead (a blip); once a
// whole lease passed without a renewal it has lost it, whatever the store says later.
TEST(Leadership, ALeaderThatCannotRenewForALeaseHasLostTheLead) {
  auto store = std::make_shared<SilencedStore>(MakeMemoryStore());
  HeadRecord me;
  me.id = "h1:1";
  Leadership lead(store, me, milliseconds(300));
  std::atomic<bool> stop{false};
  ASSERT_TRUE(lead.Acquire(stop).ok());
  store->cut = true;
  std::this_thread::sleep_for(milliseconds(120));
  EXPECT_TRUE(lead.Keep().ok()) << "a blip within the lease is not a loss";
  std::this_thread::sleep_for(milliseconds(250));
  const Status st = lead.Keep();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.message();
  store->cut = false;
  EXPECT_FALSE(lead.Keep().ok()) << "a lost lead is not taken back by renewing";
}

}  // namespace
}  // namespace elastrain