// The coordination store: a small key-value interface with revisions, compare-and-swap
// and leases -- the subset of etcd's v3 API that the controller, the agents and Gloo's
// rendezvous need. Two implementations:
//   memory://          in this process (embedded mode: controller and agent are threads
//                      of `elastrain train`; unit tests);
//   etcd://HOST:PORT   etcd's v3 JSON gateway over HTTP (cluster mode; head, agents and
//                      workers on any number of hosts).
// Every call is bounded: the etcd store's HTTP requests by StoreOptions::request_timeout,
// waits by their own timeout argument. Errors are Status values: Unavailable when the
// store cannot be reached, DeadlineExceeded for a request past its timeout, NotFound for
// an expired lease. Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace elastrain {

// A store lease: 0 means none. Keys put with a lease vanish when it expires or is revoked.
using LeaseId = int64_t;

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // revision of the put that created the key
  int64_t mod_revision = 0;     // revision of the last put; what CompareAndSwap compares
  LeaseId lease = 0;
};

// Bound on one request to a remote store.
inline constexpr std::chrono::milliseconds kDefaultStoreRequestTimeout{5000};
// How often a remote store is polled while waiting for a key (Gloo's wait), or for a
// change when the etcd store's watch cannot be set up.
inline constexpr std::chrono::milliseconds kDefaultStorePollInterval{20};

struct StoreOptions {
  std::chrono::milliseconds request_timeout = kDefaultStoreRequestTimeout;
  std::chrono::milliseconds poll_interval = kDefaultStorePollInterval;
};

class Store {
 public:
  virtual ~Store() = default;
  // "memory://" or "etcd://127.0.0.1:2379", for messages.
  virtual std::string url() const = 0;

  // The key's value, or nullopt when it does not exist.
  virtual Result<std::optional<KeyValue>> Get(const std::string& key) = 0;
  // Every key that starts with `prefix`, sorted by key.
  virtual Result<std::vector<KeyValue>> List(const std::string& prefix) = 0;
  // Sets `key` (attached to `lease` when non-zero). Returns the new store revision.
  virtual Result<int64_t> Put(const std::string& key, const std::string& value, LeaseId lease = 0) = 0;
  // Sets `key` only if its mod_revision equals `expected_mod_revision` (0: only if the
  // key does not exist). Returns false, changing nothing, when the comparison fails.
  virtual Result<bool> CompareAndSwap(const std::string& key, int64_t expected_mod_revision,
                                      const std::string& value, LeaseId lease = 0) = 0;
  // Deleting a missing key is not an error.
  virtual Status Delete(const std::string& key) = 0;
  virtual Status DeletePrefix(const std::string& prefix) = 0;

  // A lease that expires `ttl` after its grant or last KeepAlive (etcd rounds up to whole
  // seconds and may raise it to its minimum TTL).
  virtual Result<LeaseId> GrantLease(std::chrono::milliseconds ttl) = 0;
  // NotFound when the lease already expired (its keys are gone).
  virtual Status KeepAlive(LeaseId lease) = 0;
  virtual Status RevokeLease(LeaseId lease) = 0;

  // The store's revision: it grows with every change (put, delete, lease expiry).
  virtual Result<int64_t> Revision() = 0;
  // Returns the revision once it exceeds `after`, or the current one when `timeout`
  // passes first (not an error: callers re-read what they watch either way). Blocks
  // without polling (a condition variable in memory, a watch on etcd), so callers may
  // wait in a loop at no cost.
  virtual Result<int64_t> WaitForChange(int64_t after, std::chrono::milliseconds timeout) = 0;
};

// "memory://" (a fresh, empty in-process store) or "etcd://HOST:PORT" (connects and checks
// that etcd answers within the request timeout). Errors name the URL and what was expected.
Result<std::shared_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& opt = {});

std::shared_ptr<Store> MakeMemoryStore();
Result<std::shared_ptr<Store>> MakeEtcdStore(const std::string& host, int port, const StoreOptions& opt = {});

// Gloo's rendezvous::Store (set / get / wait with timeout) over `store`, every key under
// `prefix`. get() and wait() poll until the keys exist or the timeout passes, then throw
// gloo::IoException as Gloo's own stores do. So ProcessGroup::Connect rendezvouses through
// etcd in cluster mode exactly as through the file store in embedded mode.
std::shared_ptr<gloo::rendezvous::Store> MakeGlooStore(std::shared_ptr<Store> store, std::string prefix,
                                                       const StoreOptions& opt = {});

}  // namespace elastrain
