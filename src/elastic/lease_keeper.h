// Keeps an agent's lease alive from a thread of its own, and fences the agent when it
// cannot: like a kubelet that loses its API server, an agent that has not renewed its
// lease for kSelfFenceFraction of the lease time kills its workers itself, before the
// store can expire the lease and the controller hand their ranks to someone else. A
// worker cut off with its host therefore never outlives its agent's registration.
//
// Timing (lease time L): a renewal every L/4, retried every L/16 after a failure, each
// bounded by the store handle's request timeout (the agent gives renewals a handle of
// their own, timeout L/4). A second thread, the watchdog, looks at the clock every
// L/20 (at most 50 ms) whatever the renewal is blocked in. The store expires the lease
// no earlier than L after the last successful renewal was *sent*; the watchdog fences
// 3L/4 after that send, so the workers are dead (SIGKILL) before the lease can expire,
// whatever the network did.
// A renewal answered "lease not found" (it expired: the process stalled, or the cut
// outlasted L) fences at once and reports the loss, so that the agent registers again
// with a fresh lease: its slots come back as new capacity, never as members of the
// generation they were fenced out of.
//
// Every decision reads the clock given to the constructor (steady_clock by default), and
// no thread waits longer than the watchdog's slice before reading it again: a test that
// moves a clock of its own by hand sees each decision at the instant it asked for, however
// late a loaded machine runs the threads (tests/unit/lease_keeper_test.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace elastrain {

inline constexpr double kSelfFenceFraction = 0.75;

// When an agent whose last successful renewal was sent at `renewed_at` must fence.
inline std::chrono::steady_clock::time_point SelfFenceDeadline(std::chrono::steady_clock::time_point renewed_at,
                                                               std::chrono::milliseconds lease_ttl) {
  return renewed_at + std::chrono::duration_cast<std::chrono::milliseconds>(lease_ttl * kSelfFenceFraction);
}

class LeaseKeeper {
 public:
  struct Hooks {
    // Renews the lease once (bounded): OK, NotFound (expired) or another error. Called on
    // the renewal thread.
    std::function<Status()> renew;
    // Kill the workers now. Called on either thread; must be thread-safe.
    std::function<void(const std::string& why)> fence;
    // The lease is gone (after fence): register again. Called on the renewal thread.
    std::function<void()> lost;
  };
  using Now = std::function<std::chrono::steady_clock::time_point()>;
  // `now`: the clock every decision reads; called on both threads, must be thread-safe.
  LeaseKeeper(std::chrono::milliseconds lease_ttl, Hooks hooks,
              Now now = [] { return std::chrono::steady_clock::now(); });
  ~LeaseKeeper();  // Stop()
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // (Re)starts renewing, counting from `renewed_at` (when the lease was granted, read
  // from the keeper's clock): the first renewal is due L/4 after it.
  void Start(std::chrono::steady_clock::time_point renewed_at);
  void Stop();
  // True from a fence until the next Start or successful renewal.
  bool fenced() const { return fenced_; }

 private:
  void Renew();     // the renewal thread
  void Watchdog();  // the fencing thread
  void FenceOnce(const std::string& why);
  // Waits on cv_ for `d`, at most one slice, so that the caller reads the clock again soon.
  void WaitAtMost(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::duration d);

  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds slice_;  // the watchdog's period: ttl/20, 1..50 ms
  const Hooks hooks_;
  const Now now_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false, stop_ = false;                   // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point renewed_at_;      // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point next_try_;        // GUARDED_BY(mu_): the next renewal is due
  uint64_t epoch_ = 0;  // GUARDED_BY(mu_): bumped by Start, so a renewal of the old lease is ignored
  std::atomic<bool> fenced_{false};
  std::thread renewer_, watchdog_;
};

}  // namespace elastrain
