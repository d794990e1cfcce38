// The agent's lease keeper (elastic/lease_keeper.h): renewals, self-fencing before the
// lease could expire, and the lost lease that makes the agent register again.
#include "elastic/lease_keeper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

#include "test_wait.h"

namespace elastrain {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTtl{1600};

struct Recorder {
  std::atomic<int> renewals{0}, fences{0}, losses{0};
  std::atomic<int> mode{0};  // 0: renewals succeed, 1: unreachable, 2: lease not found, 3: hangs (bounded)
  std::mutex mu;
  Clock::time_point last_ok_sent, fenced_at;
  LeaseKeeper::Hooks Hooks() {
    return {[this]() -> Status {
              const auto sent = Clock::now();
              ++renewals;
              if (mode == 1) return Status::Unavailable("cut off");
              if (mode == 3) {
                std::this_thread::sleep_for(kTtl * 2);
                return Status::DeadlineExceeded("no answer");
              }
              if (mode == 2) return Status::NotFound("lease not found");
              std::lock_guard<std::mutex> lock(mu);
              last_ok_sent = sent;
              return Status::OK();
            },
            [this](const std::string&) {
              std::lock_guard<std::mutex> lock(mu);
              fenced_at = Clock::now();
              ++fences;
            },
            [this] { ++losses; }};
  }
  // Switches renewals to `m` and waits for the fence: the ms from the last successful
  // renewal's send to the fence, or -1 if none came.
  long long MsToFence(int m) {
    mode = m;
    if (!WaitUntil([&] { return fences.load() > 0; }, std::chrono::milliseconds(5000))) return -1;
    std::lock_guard<std::mutex> lock(mu);
    return std::chrono::duration_cast<std::chrono::milliseconds>(fenced_at - last_ok_sent).count();
  }
};

TEST(LeaseKeeper, RenewsAndNeverFencesWhileTheStoreAnswers) {
  Recorder r;
  LeaseKeeper k(kTtl, r.Hooks());
  k.Start(Clock::now());
  std::this_thread::sleep_for(kTtl * 3);
  k.Stop();
  EXPECT_EQ(r.fences, 0);
  EXPECT_GE(r.renewals, 3) << "a renewal every ttl/4";
  EXPECT_FALSE(k.fenced());
}

TEST(LeaseKeeper, FencesBeforeTheLeaseCouldExpireWhenCutOff) {
  Recorder r;
  LeaseKeeper k(kTtl, r.Hooks());
  k.Start(Clock::now());
  std::this_thread::sleep_for(kTtl);
  const long long ms = r.MsToFence(1);
  ASSERT_GE(ms, 0) << "no fence";
  k.Stop();
  std::cout << "[ measured ] fenced " << ms << " ms after the last successful renewal was sent (lease "
            << kTtl.count() << " ms)\n";
  EXPECT_GE(ms, kTtl.count() * 3 / 4 - 5);
  EXPECT_LT(ms, kTtl.count()) << "the workers must be dead before the store can expire the lease";
  EXPECT_EQ(r.fences, 1) << "one fence per outage";
  EXPECT_EQ(r.losses, 0) << "cut off is not lost: the lease may still be alive";
  EXPECT_TRUE(k.fenced());
}

// A renewal that hangs (a half-open connection, a store timeout longer than the lease)
// does not delay the fence: the watchdog thread keeps the clock.
TEST(LeaseKeeper, FencesInTimeWhileARenewalHangs) {
  Recorder r;
  LeaseKeeper k(kTtl, r.Hooks());
  k.Start(Clock::now());
  std::this_thread::sleep_for(kTtl / 2);
  const long long ms = r.MsToFence(3);
  ASSERT_GE(ms, 0) << "no fence";
  std::cout << "[ measured ] fenced " << ms << " ms after the last successful renewal, its successor hanging\n";
  EXPECT_LT(ms, kTtl.count());
  r.mode = 0;
  k.Stop();
}

TEST(LeaseKeeper, AnExpiredLeaseFencesAtOnceAndAsksToRegisterAgain) {
  Recorder r;
  LeaseKeeper k(kTtl, r.Hooks());
  k.Start(Clock::now());
  r.mode = 2;
  ASSERT_TRUE(WaitUntil([&] { return r.losses.load() > 0; }, milliseconds(5000)));
  EXPECT_EQ(r.fences, 1);
  const int renewals = r.renewals;
  std::this_thread::sleep_for(kTtl);
  EXPECT_EQ(r.renewals, renewals) << "no renewal of a lease that is gone";
  r.mode = 0;
  k.Start(Clock::now());  // registered again with a new lease
  EXPECT_FALSE(k.fenced());
  ASSERT_TRUE(WaitUntil([&] { return r.renewals.load() > renewals; }, milliseconds(5000)));
  k.Stop();
  EXPECT_EQ(r.fences, 1);
}

}  // namespace
}  // namespace elastrain
