// The agent's lease keeper (elastic/lease_keeper.h): renewals, self-fencing before the
// lease could expire, and the lost lease that makes the agent register again.
//
// The keeper reads a clock this test moves by hand (ManualClock), so each assertion is
// about the instant the keeper decided at, not about how soon a loaded machine ran its
// threads: a slow machine makes these tests take longer, never fail.
#include "elastic/lease_keeper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "test_wait.h"

namespace elastrain {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTtl{400};  // of the manual clock: the keeper's slice is 20 ms of real time
constexpr milliseconds kPeriod = kTtl / 4;
constexpr milliseconds kRetry = kTtl / 16;
constexpr milliseconds kFenceAfter = kTtl * 3 / 4;

long long Ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

// A clock that moves only when the test says. The keeper's threads read it through Now()
// (counted per thread); the test and the hooks read it through Peek() (not counted).
class ManualClock {
 public:
  Clock::time_point Now() {
    std::lock_guard<std::mutex> lock(mu_);
    ++reads_[std::this_thread::get_id()];
    return t_;
  }
  Clock::time_point Peek() {
    std::lock_guard<std::mutex> lock(mu_);
    return t_;
  }
  LeaseKeeper::Now Reader() {
    return [this] { return Now(); };
  }
  void Advance(Clock::duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    t_ += d;
    reads_.clear();
  }
  // True once `threads` threads have each read the clock 3 times since the last Advance:
  // each keeper thread reads it at most twice a pass, so each has been through a whole
  // pass at the new time (a renewal or fence due then has happened). False after the
  // hang guard.
  bool Settled(size_t threads) {
    return WaitUntil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      size_t n = 0;
      for (const auto& [id, reads] : reads_) n += reads >= 3;
      return n >= threads;
    });
  }

 private:
  std::mutex mu_;
  Clock::time_point t_ = Clock::time_point() + std::chrono::hours(1);
  std::map<std::thread::id, int> reads_;
};

struct Recorder {
  explicit Recorder(ManualClock* c) : clock(c) {}
  ManualClock* clock;
  std::atomic<int> renewals{0}, fences{0}, losses{0};
  std::atomic<int> mode{0};  // 0: renewals succeed, 1: unreachable, 2: lease not found, 3: hangs until mode changes
  std::mutex mu;
  Clock::time_point last_ok_sent, fenced_at;
  LeaseKeeper::Hooks Hooks() {
    return {[this]() -> Status {
              const auto sent = clock->Peek();
              ++renewals;
              if (mode == 1) return Status::Unavailable("cut off");
              if (mode == 3) {
                (void)WaitUntil([&] { return mode != 3; });
                return Status::DeadlineExceeded("no answer");
              }
              if (mode == 2) return Status::NotFound("lease not found");
              std::lock_guard<std::mutex> lock(mu);
              last_ok_sent = sent;
              return Status::OK();
            },
            [this](const std::string&) {
              std::lock_guard<std::mutex> lock(mu);
              fenced_at = clock->Peek();
              ++fences;
            },
            [this] { ++losses; }};
  }
  long long MsFromLastRenewalToFence() {
    std::lock_guard<std::mutex> lock(mu);
    return Ms(fenced_at - last_ok_sent);
  }
};

// Moves the clock to `t` in steps of at most `step`, letting `threads` keeper threads
// settle at each.
void AdvanceTo(ManualClock& clock, Clock::time_point t, milliseconds step, size_t threads) {
  while (clock.Peek() < t) {
    clock.Advance(std::min<Clock::duration>(step, t - clock.Peek()));
    ASSERT_TRUE(clock.Settled(threads)) << "the keeper's threads stopped reading the clock";
  }
}

TEST(LeaseKeeper, RenewsEveryQuarterLeaseAndNeverFencesWhileTheStoreAnswers) {
  ManualClock clock;
  Recorder r(&clock);
  LeaseKeeper k(kTtl, r.Hooks(), clock.Reader());
  k.Start(clock.Peek());
  for (int i = 1; i <= 12; ++i) {  // 3 leases
    clock.Advance(kPeriod);
    ASSERT_TRUE(clock.Settled(2));
    EXPECT_EQ(r.renewals, i) << "one renewal every ttl/4";
    EXPECT_EQ(r.fences, 0);
  }
  k.Stop();
  EXPECT_FALSE(k.fenced());
}

TEST(LeaseKeeper, FencesThreeQuartersOfALeaseAfterTheLastRenewalWhenCutOff) {
  ManualClock clock;
  Recorder r(&clock);
  LeaseKeeper k(kTtl, r.Hooks(), clock.Reader());
  k.Start(clock.Peek());
  clock.Advance(kPeriod);
  ASSERT_TRUE(clock.Settled(2));
  ASSERT_EQ(r.renewals, 1);
  const Clock::time_point last_ok = clock.Peek();
  r.mode = 1;
  // Up to 1 ms before the fence is due: retries every ttl/16, no fence.
  AdvanceTo(clock, last_ok + kFenceAfter - milliseconds(1), kRetry, 2);
  EXPECT_EQ(r.fences, 0) << "fenced before 3/4 of the lease";
  EXPECT_GE(r.renewals, 1 + Ms(kFenceAfter - kPeriod) / Ms(kRetry)) << "a retry every ttl/16";
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(clock.Settled(2));
  ASSERT_EQ(r.fences, 1) << "no fence when 3/4 of the lease had passed";
  EXPECT_EQ(r.MsFromLastRenewalToFence(), Ms(kFenceAfter));
  EXPECT_LT(r.MsFromLastRenewalToFence(), Ms(kTtl)) << "the workers must be dead before the store can expire the lease";
  // The outage goes on past the lease: still one fence, and not lost (the lease may be alive).
  AdvanceTo(clock, last_ok + kTtl * 2, kRetry, 2);
  EXPECT_EQ(r.fences, 1) << "one fence per outage";
  EXPECT_EQ(r.losses, 0) << "cut off is not lost: the lease may still be alive";
  EXPECT_TRUE(k.fenced());
  // The store answers again: the next renewal lifts the fence.
  r.mode = 0;
  AdvanceTo(clock, clock.Peek() + kRetry, kRetry, 2);
  EXPECT_FALSE(k.fenced());
  k.Stop();
}

// A renewal that hangs (a half-open connection, a store timeout longer than the lease)
// does not delay the fence: the watchdog thread keeps the clock.
TEST(LeaseKeeper, FencesInTimeWhileARenewalHangs) {
  ManualClock clock;
  Recorder r(&clock);
  LeaseKeeper k(kTtl, r.Hooks(), clock.Reader());
  k.Start(clock.Peek());
  clock.Advance(kPeriod);
  ASSERT_TRUE(clock.Settled(2));
  const Clock::time_point last_ok = clock.Peek();
  r.mode = 3;
  clock.Advance(kPeriod);
  ASSERT_TRUE(WaitUntil([&] { return r.renewals.load() == 2; })) << "the second renewal was not sent";
  // Only the watchdog reads the clock now.
  AdvanceTo(clock, last_ok + kFenceAfter - milliseconds(1), kRetry, 1);
  EXPECT_EQ(r.fences, 0);
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(clock.Settled(1));
  ASSERT_EQ(r.fences, 1) << "the hanging renewal kept the watchdog from fencing";
  EXPECT_EQ(r.MsFromLastRenewalToFence(), Ms(kFenceAfter));
  r.mode = 0;
  k.Stop();
}

TEST(LeaseKeeper, AnExpiredLeaseFencesAtOnceAndAsksToRegisterAgain) {
  ManualClock clock;
  Recorder r(&clock);
  LeaseKeeper k(kTtl, r.Hooks(), clock.Reader());
  const Clock::time_point t0 = clock.Peek();
  k.Start(t0);
  r.mode = 2;
  clock.Advance(kPeriod);
  ASSERT_TRUE(clock.Settled(2));
  EXPECT_EQ(r.losses, 1);
  EXPECT_EQ(r.fences, 1);
  {
    std::lock_guard<std::mutex> lock(r.mu);
    EXPECT_EQ(Ms(r.fenced_at - t0), Ms(kPeriod)) << "at the answer, not 3/4 of a lease later";
  }
  AdvanceTo(clock, clock.Peek() + kTtl * 2, kPeriod, 2);
  EXPECT_EQ(r.renewals, 1) << "no renewal of a lease that is gone";
  EXPECT_EQ(r.fences, 1) << "the watchdog leaves a lost lease alone";
  r.mode = 0;
  k.Start(clock.Peek());  // registered again with a new lease
  EXPECT_FALSE(k.fenced());
  clock.Advance(kPeriod);
  ASSERT_TRUE(clock.Settled(2));
  EXPECT_EQ(r.renewals, 2);
  k.Stop();
  EXPECT_EQ(r.fences, 1);
  EXPECT_EQ(r.losses, 1);
}

// The agent's keeper reads steady_clock: it renews on its own (no timing asserted).
TEST(LeaseKeeper, RenewsOnTheSteadyClock) {
  ManualClock unused;
  Recorder r(&unused);
  LeaseKeeper k(kTtl, r.Hooks());
  k.Start(Clock::now());
  EXPECT_TRUE(WaitUntil([&] { return r.renewals.load() >= 2; }));
  k.Stop();
}

}  // namespace
}  // namespace elastrain
