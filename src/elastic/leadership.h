// The lead among the heads of one cluster (docs/cluster.md "Several heads"): a head leads
// while it holds keys::Head() with a lease of `ttl`. A standby waits for the key to go with
// its holder's lease, then takes it. A leader is fenced twice:
//  - by the store: every write it makes is guarded by the key's mod_revision (guard(),
//    Store::PutIf), so none lands once the key is gone or another head's;
//  - by time: Keep() counts the lead lost once `ttl` has passed since the last renewal it
//    sent that the store accepted (the store's lease cannot end before that), so a leader
//    cut off from the store stops deciding before a standby can take over.
// A head that lost the lead never takes it back on its own: it stands by like any other.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "store/store.h"
#include "wire/protocol.h"

namespace elastrain {

// The message of the FailedPrecondition a lost lead is reported with.
inline constexpr char kLostLead[] = "lost the lead";

class Leadership {
 public:
  Leadership(std::shared_ptr<Store> store, HeadRecord me, std::chrono::milliseconds ttl);
  ~Leadership();  // revokes a lease still held: a standby takes over at once

  // Waits until this head leads (at once when it still does); the seconds it waited.
  // Unavailable when `stop` is set first.
  Result<double> Acquire(const std::atomic<bool>& stop);
  // Renews the lease when a third of `ttl` has passed. FailedPrecondition (kLostLead ...)
  // once the lead is lost: the store says the lease ended, or no renewal got through
  // within `ttl`. An unreachable store within the lease is not yet a loss.
  Status Keep();
  // The lead asked of the store now (a read of the key), and of the clock.
  Status Verify();
  // The condition every write of the leader carries.
  StoreGuard guard() const { return {keys::Head(), revision_}; }
  bool held() const { return lease_ != 0; }
  const HeadRecord& me() const { return me_; }

 private:
  using Clock = std::chrono::steady_clock;
  Status Lost(const std::string& why);

  std::shared_ptr<Store> store_;
  HeadRecord me_;
  std::chrono::milliseconds ttl_;
  LeaseId lease_ = 0;
  int64_t revision_ = 0;         // keys::Head()'s mod_revision as this head wrote it
  Clock::time_point renewed_;    // when the last accepted renewal (or the grant) was sent
};

// "<hostname>:<pid>": a head's id.
std::string DefaultHeadId();

}  // namespace elastrain
