// The controller's executor against an in-memory store (no processes): what it writes
// while nothing happens. A controller that rewrites the job record on every decision
// wakes itself (its own write moves the revision it waits on) and every agent: a spin
// that cost two thirds of a core (issue 20). Counted, not timed. And a submission that
// lands between the controller's reads of the spec and the record.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "elastic/controller.h"
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

}  // namespace
}  // namespace elastrain
