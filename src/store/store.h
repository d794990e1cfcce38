// The coordination store: a small key-value interface with revisions, compare-and-swap
// and leases -- the subset of etcd's v3 API that the controller, the agents and Gloo's
// rendezvous need. Two implementations:
//   memory://          in this process (embedded mode: controller and agent are threads
//                      of `elastrain train`; unit tests);
//   etcd://HOST:PORT   etcd's v3 JSON gateway over HTTP (cluster mode; head, agents and
//                      workers on any number of hosts);
//   etcds://HOST:PORT  the same over HTTPS: the server's certificate is always verified
//                      (StoreOptions::ca_file, else the system's CAs), a client certificate
//                      is sent when given, and with StoreOptions::user every request carries
//                      an etcd auth token (docs/etcd-tls.md).
// Every call is bounded: the etcd store's HTTP requests by StoreOptions::request_timeout,
// waits by their own timeout argument. Errors are Status values: Unavailable when the
// store cannot be reached, DeadlineExceeded for a request past its timeout, NotFound for
// an expired lease. Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

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

// A condition of Store::PutIf: `key` is at `mod_revision` (0: does not exist).
struct StoreGuard {
  std::string key;
  int64_t mod_revision = 0;
};

// Bound on one request to a remote store.
inline constexpr std::chrono::milliseconds kDefaultStoreRequestTimeout{5000};
// How often a remote store is polled while waiting for a key (Gloo's wait), or for a
// change when the etcd store's watch cannot be set up.
inline constexpr std::chrono::milliseconds kDefaultStorePollInterval{20};

struct StoreOptions {
  std::chrono::milliseconds request_timeout = kDefaultStoreRequestTimeout;
  std::chrono::milliseconds poll_interval = kDefaultStorePollInterval;
  // The key prefix Revision() reads and WaitForChange() watches (an etcd user may be
  // granted only the prefix its keys live under; elastrain passes keys::kRoot). A
  // change outside it does not wake WaitForChange. Empty: the whole keyspace.
  std::string key_scope;

  // Credentials, etcds:// only (refused with etcd://: they would travel in clear).
  // Files are PEM; the key and password files must be regular files that neither group
  // nor others can read. The password file's first line is the password; it is read when
  // the store opens and never logged.
  std::string ca_file;        // CA bundle that signed etcd's certificate; empty: the system's
  std::string cert_file;      // client certificate, sent when set (etcd --client-cert-auth)
  std::string key_file;       // its private key; set both or neither
  std::string user;           // etcd user (etcd auth enabled); empty: no token is sent
  std::string password_file;  // that user's password; required with `user`

  // Plain etcd:// to a host that is not loopback (127.0.0.0/8, ::1, localhost) is
  // refused by the long-running commands unless this is set (--insecure-store):
  // anyone on that network could read and write the job. CheckStoreTransport.
  bool insecure_store = false;
};

// The environment variables that carry the credentials above to processes that open the
// store without flags (the workers an agent spawns inherit them).
inline constexpr char kEnvEtcdCa[] = "ELASTRAIN_ETCD_CA";
inline constexpr char kEnvEtcdCert[] = "ELASTRAIN_ETCD_CERT";
inline constexpr char kEnvEtcdKey[] = "ELASTRAIN_ETCD_KEY";
inline constexpr char kEnvEtcdUser[] = "ELASTRAIN_ETCD_USER";
inline constexpr char kEnvEtcdPasswordFile[] = "ELASTRAIN_ETCD_PASSWORD_FILE";

// Fills each credential of `opt` that is still empty from its ELASTRAIN_ETCD_* variable,
// read through `getenv` (tests pass their own). So a value already set (a flag) wins.
void FillStoreCredentialsFromEnv(StoreOptions* opt,
                                 const std::function<const char*(const char*)>& getenv = std::getenv);
// The ELASTRAIN_ETCD_* variables for `opt`'s non-empty credentials (paths and the user
// name, never a password), for a child's environment.
std::map<std::string, std::string> StoreCredentialsEnv(const StoreOptions& opt);

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
  // Sets `key` only if every guard holds (each guard's key at that mod_revision; 0: the
  // key does not exist), in one transaction. Returns false, changing nothing, when one
  // does not. A leader writes this way, guarded by its leader key: once that key is gone
  // (its lease ended) or another's, no write of the old leader lands.
  virtual Result<bool> PutIf(const std::vector<StoreGuard>& guards, const std::string& key, const std::string& value,
                             LeaseId lease = 0) = 0;
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

// A Store that hands every call to `inner`: the base of decorators, which override only
// what they change (store/signed_records.h signs and verifies; tests count).
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  std::string url() const override { return inner_->url(); }
  Result<std::optional<KeyValue>> Get(const std::string& key) override { return inner_->Get(key); }
  Result<std::vector<KeyValue>> List(const std::string& prefix) override { return inner_->List(prefix); }
  Result<int64_t> Put(const std::string& key, const std::string& value, LeaseId lease = 0) override {
    return inner_->Put(key, value, lease);
  }
  Result<bool> CompareAndSwap(const std::string& key, int64_t expected_mod_revision, const std::string& value,
                              LeaseId lease = 0) override {
    return inner_->CompareAndSwap(key, expected_mod_revision, value, lease);
  }
  Result<bool> PutIf(const std::vector<StoreGuard>& guards, const std::string& key, const std::string& value,
                     LeaseId lease = 0) override {
    return inner_->PutIf(guards, key, value, lease);
  }
  Status Delete(const std::string& key) override { return inner_->Delete(key); }
  Status DeletePrefix(const std::string& prefix) override { return inner_->DeletePrefix(prefix); }
  Result<LeaseId> GrantLease(std::chrono::milliseconds ttl) override { return inner_->GrantLease(ttl); }
  Status KeepAlive(LeaseId lease) override { return inner_->KeepAlive(lease); }
  Status RevokeLease(LeaseId lease) override { return inner_->RevokeLease(lease); }
  Result<int64_t> Revision() override { return inner_->Revision(); }
  Result<int64_t> WaitForChange(int64_t after, std::chrono::milliseconds timeout) override {
    return inner_->WaitForChange(after, timeout);
  }

 protected:
  Store& inner() { return *inner_; }

 private:
  std::shared_ptr<Store> inner_;
};

// "memory://" (a fresh, empty in-process store), "etcd://HOST:PORT" or "etcds://HOST:PORT"
// (connects, authenticates when opt.user is set, and checks that etcd answers within the
// request timeout). Errors name the URL and what was expected: a refused certificate, a
// wrong password, a TLS port spoken to in plain HTTP and the reverse each get a hint.
Result<std::shared_ptr<Store>> OpenStore(const std::string& url, const StoreOptions& opt = {});

// A store URL taken apart; "[::1]" comes back as host "::1".
struct StoreAddress {
  enum class Kind { kMemory, kEtcd };
  Kind kind = Kind::kMemory;
  bool tls = false;  // etcds://
  std::string host;
  int port = 0;
};
// InvalidArgument naming the URL and the accepted forms when it is none of them.
Result<StoreAddress> ParseStoreUrl(const std::string& url);
// Whether `host` (as ParseStoreUrl gives it: an IPv6 address bare) is this machine's
// loopback: 127.0.0.0/8, ::1 (also as ::ffff:127.x.y.z) or the name localhost.
bool IsLoopbackHost(const std::string& host);

std::shared_ptr<Store> MakeMemoryStore();
// Does not contact etcd; `tls` selects HTTPS (etcds://). Checks the credential files of
// `opt` (present, readable, private) and reads the password.
Result<std::shared_ptr<Store>> MakeEtcdStore(const std::string& host, int port, const StoreOptions& opt = {},
                                             bool tls = false);

}  // namespace elastrain
