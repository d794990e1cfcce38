// The in-process store: a sorted map with etcd's revision and lease semantics, for
// embedded mode (controller and agent threads of one process) and unit tests.
#include <condition_variable>
#include <map>
#include <mutex>

#include "store/store.h"

namespace elastrain {

namespace {

using Clock = std::chrono::steady_clock;

class MemoryStore : public Store {
 public:
  std::string url() const override { return "memory://"; }

  Result<std::optional<KeyValue>> Get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLeases();
    auto it = kv_.find(key);
    if (it == kv_.end()) return std::optional<KeyValue>();
    return std::optional<KeyValue>(it->second);
  }

  Result<std::vector<KeyValue>> List(const std::string& prefix) override {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLeases();
    std::vector<KeyValue> out;
    for (auto it = kv_.lower_bound(prefix); it != kv_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      out.push_back(it->second);
    return out;
  }

  Result<int64_t> Put(const std::string& key, const std::string& value, LeaseId lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLeases();
    if (lease != 0 && !leases_.count(lease))
      return Status::NotFound("memory store: lease " + std::to_string(lease) + " not found (expired or revoked)");
    return PutLocked(key, value, lease);
  }

  Result<bool> CompareAndSwap(const std::string& key, int64_t expected, const std::string& value,
                              LeaseId lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLeases();
    auto it = kv_.find(key);
    const int64_t current = it == kv_.end() ? 0 : it->second.mod_revision;
    if (current != expected) return false;
    if (lease != 0 && !leases_.count(lease))
      return Status::NotFound("memory store: lease " + std::to_string(lease) + " not found (expired or revoked)");
    PutLocked(key, value, lease);
    return true;
  }

  Result<bool> PutIf(const std::vector<StoreGuard>& guards, const std::string& key, const std::string& value,
                     LeaseId lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLeases();
    for (const StoreGuard& g : guards) {
      auto it = kv_.find(g.key);
      if ((it == kv_.end() ? 0 : it->second.mod_revision) != g.mod_revision) return false;
    }
    if (lease != 0 && !leases_.count(lease))
      return Status::NotFound("memory store: lease " + std::to_string(lease) + " not found (expired or revoked)");
    PutLocked(key, value, lease);
    return true;
  }

  Status Delete(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (kv_.erase(key)) Bump();
    return Status::OK();
  }

  Status DeletePrefix(const std::string& prefix) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kv_.lower_bound(prefix);
    bool any = false;
    while (it != kv_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
      it = kv_.erase(it);
      any = true;
    }
    if (any) Bump();
    return Status::OK();
  }

  Result<LeaseId> GrantLease(std::chrono::milliseconds ttl) override {
    std::lock_guard<std::mutex> lock(mu_);
    const LeaseId id = next_lease_++;
    leases_[id] = {ttl, Clock::now() + ttl};
    return id;
  }

  Status KeepAlive(LeaseId lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLeases();
    auto it = leases_.find(lease);
    if (it == leases_.end())
      return Status::NotFound("memory store: lease " + std::to_string(lease) + " not found (expired or revoked)");
    it->second.expires = Clock::now() + it->second.ttl;
    return Status::OK();
  }

  Status RevokeLease(LeaseId lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (leases_.erase(lease)) DropKeysOf(lease);
    return Status::OK();
  }

  Result<int64_t> Revision() override {
    std::lock_guard<std::mutex> lock(mu_);
    ExpireLeases();
    return revision_;
  }

  Result<int64_t> WaitForChange(int64_t after, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ExpireLeases();
      if (revision_ > after || Clock::now() >= deadline) return revision_;
      // Wake at the deadline or at the next lease expiry, whichever comes first.
      auto wake = deadline;
      for (auto& [id, l] : leases_) wake = std::min(wake, l.expires);
      cv_.wait_until(lock, wake);
    }
  }

 private:
  struct Lease {
    std::chrono::milliseconds ttl;
    Clock::time_point expires;
  };
  int64_t PutLocked(const std::string& key, const std::string& value, LeaseId lease) {
    Bump();
    KeyValue& kv = kv_[key];
    if (kv.create_revision == 0) kv.create_revision = revision_;
    kv.key = key;
    kv.value = value;
    kv.mod_revision = revision_;
    kv.lease = lease;
    return revision_;
  }
  void Bump() {
    ++revision_;
    cv_.notify_all();
  }
  void DropKeysOf(LeaseId lease) {
    bool any = false;
    for (auto it = kv_.begin(); it != kv_.end();) {
      if (it->second.lease == lease) {
        it = kv_.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    if (any) Bump();
  }
  // Called with mu_ held by every operation, so expiry is seen as soon as anyone looks.
  void ExpireLeases() {
    const auto now = Clock::now();
    for (auto it = leases_.begin(); it != leases_.end();) {
      if (it->second.expires <= now) {
        const LeaseId id = it->first;
        it = leases_.erase(it);
        DropKeysOf(id);
      } else {
        ++it;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, KeyValue> kv_;  // GUARDED_BY(mu_)
  std::map<LeaseId, Lease> leases_;     // GUARDED_BY(mu_)
  int64_t revision_ = 1;                // GUARDED_BY(mu_); etcd starts at 1 too
  LeaseId next_lease_ = 1;              // GUARDED_BY(mu_)
};

}  // namespace

std::shared_ptr<Store> MakeMemoryStore() { return std::make_shared<MemoryStore>(); }

}  // namespace elastrain
