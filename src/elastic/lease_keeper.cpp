#include "elastic/lease_keeper.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/log.h"

namespace elastrain {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

LeaseKeeper::LeaseKeeper(milliseconds lease_ttl, Hooks hooks) : ttl_(lease_ttl), hooks_(std::move(hooks)) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

void LeaseKeeper::Start(Clock::time_point renewed_at) {
  std::lock_guard<std::mutex> lock(mu_);
  renewed_at_ = renewed_at;
  running_ = true;
  ++epoch_;
  fenced_ = false;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  cv_.notify_all();
}

void LeaseKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::Run() {
  const milliseconds period = std::max(ttl_ / 4, milliseconds(1));
  const milliseconds retry = std::max(ttl_ / 8, milliseconds(1));
  // Wakes at least this often to check the fence deadline.
  const milliseconds slice = std::clamp(ttl_ / 20, milliseconds(1), milliseconds(50));
  Clock::time_point next_try = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!running_) {
      cv_.wait(lock, [this] { return stop_ || running_; });
      next_try = Clock::now() + period;
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (!fenced_ && now >= SelfFenceDeadline(renewed_at_, ttl_)) {
      fenced_ = true;
      const std::string why = fmt::format("no lease renewal for {} ms (lease {} ms)",
          std::chrono::duration_cast<milliseconds>(now - renewed_at_).count(), ttl_.count());
      lock.unlock();
      hooks_.fence(why);
      lock.lock();
      continue;
    }
    if (now < next_try) {
      cv_.wait_until(lock, std::min(next_try, now + slice));
      continue;
    }
    const uint64_t epoch = epoch_;
    lock.unlock();
    const Clock::time_point sent = Clock::now();
    const Status st = hooks_.renew();
    lock.lock();
    if (epoch != epoch_) continue;  // Start() came meanwhile: a new lease
    if (st.ok()) {
      renewed_at_ = sent;
      fenced_ = false;
      next_try = sent + period;
    } else if (st.code() == StatusCode::kNotFound) {
      running_ = false;  // until the agent registers again
      const bool already = fenced_.exchange(true);
      lock.unlock();
      if (!already) hooks_.fence("the lease expired: " + st.message());
      hooks_.lost();
      lock.lock();
    } else {
      LOG_WARN("lease renewal failed ({} ms to self-fencing): {}",
               std::max<int64_t>(0, std::chrono::duration_cast<milliseconds>(
                                        SelfFenceDeadline(renewed_at_, ttl_) - Clock::now()).count()),
               st.message());
      next_try = Clock::now() + retry;
    }
  }
}

}  // namespace elastrain
