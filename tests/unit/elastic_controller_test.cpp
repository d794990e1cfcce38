// The controller's executor against an in-memory store (no processes): what it writes
// while nothing happens. A controller that rewrites the job record on every decision
// wakes itself (its own write moves the revision it waits on) and every agent: a spin
// that cost two thirds of a core (issue 20). Counted, not timed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
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
class CountingStore : public Store {
 public:
  std::string url() const override { return inner_->url(); }
  Result<std::optional<KeyValue>> Get(const std::string& key) override { return inner_->Get(key); }
  Result<std::vector<KeyValue>> List(const std::string& prefix) override { return inner_->List(prefix); }
  Result<int64_t> Put(const std::string& key, const std::string& value, LeaseId lease) override {
    if (key == keys::JobRecord()) ++record_puts;
    return inner_->Put(key, value, lease);
  }
  Result<bool> CompareAndSwap(const std::string& key, int64_t expected, const std::string& value,
                              LeaseId lease) override {
    return inner_->CompareAndSwap(key, expected, value, lease);
  }
  Status Delete(const std::string& key) override { return inner_->Delete(key); }
  Status DeletePrefix(const std::string& prefix) override { return inner_->DeletePrefix(prefix); }
  Result<LeaseId> GrantLease(milliseconds ttl) override { return inner_->GrantLease(ttl); }
  Status KeepAlive(LeaseId lease) override { return inner_->KeepAlive(lease); }
  Status RevokeLease(LeaseId lease) override { return inner_->RevokeLease(lease); }
  Result<int64_t> Revision() override { return inner_->Revision(); }
  Result<int64_t> WaitForChange(int64_t after, milliseconds timeout) override {
    auto r = inner_->WaitForChange(after, timeout);
    if (r.ok() && r.value() > after) ++waits_woken;
    ++waits;
    return r;
  }

  std::atomic<int> record_puts{0}, waits{0}, waits_woken{0};

 private:
  std::shared_ptr<Store> inner_ = MakeMemoryStore();
};

JobState StateIn(Store& store) {
  auto kv = store.Get(keys::JobRecord());
  if (!kv.ok() || !kv.value()) return JobState::kPending;
  JobRecord r;
  if (!FromJson(kv.value()->value, &r).ok()) return JobState::kPending;
  return r.state;
}

TEST(ControllerTest, AQuietJobIsNotRewrittenAndDoesNotWakeTheController) {
  const std::string dir = FreshDir("controller_quiet");
  auto store = std::make_shared<CountingStore>();
  TrainConfig cfg;
  cfg.base_output_directory = dir;
  cfg.num_workers_spec = "2";
  cfg.min_workers = cfg.max_workers = 2;
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

}  // namespace
}  // namespace elastrain
