#include "elastic/lease_keeper.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

LeaseKeeper::LeaseKeeper(milliseconds lease_ttl, Hooks hooks, Now now)
    : ttl_(lease_ttl),
      slice_(std::clamp(lease_ttl / 20, milliseconds(1), milliseconds(50))),
      hooks_(std::move(hooks)),
      now_(std::move(now)) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

void LeaseKeeper::Start(Clock::time_point renewed_at) {
  std::lock_guard<std::mutex> lock(mu_);
  renewed_at_ = renewed_at;
  next_try_ = renewed_at + std::max(ttl_ / 4, milliseconds(1));
  running_ = true;
  ++epoch_;
  fenced_ = false;
  if (!renewer_.joinable()) {
    renewer_ = std::thread([this] { Renew(); });
    watchdog_ = std::thread([this] { Watchdog(); });
  }
  cv_.notify_all();
}

void LeaseKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

void LeaseKeeper::FenceOnce(const std::string& why) {
  if (!fenced_.exchange(true)) hooks_.fence(why);
}

void LeaseKeeper::WaitAtMost(std::unique_lock<std::mutex>& lock, Clock::duration d) {
  cv_.wait_for(lock, std::clamp<Clock::duration>(d, Clock::duration::zero(), slice_));
}

// One clock reading per pass: a pass that read the clock at t has fenced if a fence was
// due at t before it reads the clock again.
void LeaseKeeper::Watchdog() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const Clock::time_point now = now_();
    if (running_ && !fenced_ && now >= SelfFenceDeadline(renewed_at_, ttl_)) {
      const std::string why = fmt::format("no lease renewal for {} ms (lease {} ms)",
          std::chrono::duration_cast<milliseconds>(now - renewed_at_).count(), ttl_.count());
      lock.unlock();
      FenceOnce(why);
      lock.lock();
      continue;
    }
    WaitAtMost(lock, slice_);
  }
}

// At most two clock readings per pass: when it starts (also the renewal's send time) and,
// after a failed renewal, when the retry is due from.
void LeaseKeeper::Renew() {
  const milliseconds period = std::max(ttl_ / 4, milliseconds(1));
  const milliseconds retry = std::max(ttl_ / 16, milliseconds(1));
  int failed_since_ok = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const Clock::time_point now = now_();
    if (!running_ || now < next_try_) {
      WaitAtMost(lock, running_ ? next_try_ - now : Clock::duration(period));
      continue;
    }
    const uint64_t epoch = epoch_;
    lock.unlock();
    const Clock::time_point sent = now;
    const Status st = hooks_.renew();
    lock.lock();
    if (epoch != epoch_) continue;  // Start() came meanwhile: a new lease
    if (st.ok()) {
      if (failed_since_ok > 0) LOG_INFO("lease renewed again after {} failed tries", failed_since_ok);
      failed_since_ok = 0;
      renewed_at_ = sent;
      fenced_ = false;
      next_try_ = sent + period;
    } else if (st.code() == StatusCode::kNotFound) {
      running_ = false;  // until the agent registers again
      lock.unlock();
      FenceOnce("the lease expired: " + st.message());
      hooks_.lost();
      lock.lock();
    } else {
      // The first failure of an outage is a warning; the retries (every L/16) are not news.
      const Clock::time_point failed = now_();
      const int64_t left = std::chrono::duration_cast<milliseconds>(SelfFenceDeadline(renewed_at_, ttl_) - failed).count();
      if (failed_since_ok++ == 0) LOG_WARN("lease renewal failed ({} ms to self-fencing): {}", std::max<int64_t>(0, left), st.message());
      else LOG_DEBUG("lease renewal failed again: {}", st.message());
      next_try_ = failed + retry;
    }
  }
}

}  // namespace elastrain
