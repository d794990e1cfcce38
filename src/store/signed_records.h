// Records only the head may write, signed (issue 33): the store is not a trust boundary.
// Whoever can write etcd (a leaked `elastrain` role, a plain etcd:// port) could put a job
// spec whose launch_program every agent runs. The head signs the records that make agents
// act -- the job spec, the plan, the generation's stop, the agents' commands -- with an
// Ed25519 key only it holds (OpenSSL); agents verify them with the head's public key,
// given to them as a file (never fetched from the store), and refuse, log and ignore
// anything unsigned, forged, moved to another key or rolled back.
//
// The signature lives in the record's JSON object as
//   "signature": {"by": "ed25519", "at": T, "sig": "<128 hex digits>"}
// over the bytes  "elastrain-signed-v1\n" + key + "\n" + at (6 decimals) + "\n" + the
// object without "signature", dumped by nlohmann::json (keys sorted: one text per value).
// The key binds a record to its place (a command moved to another agent fails); `at`
// (the head's wall clock) lets a reader refuse an older record put back (a replay).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "common/status.h"
#include "store/store.h"

namespace elastrain {

// An Ed25519 private key: the head's.
class SigningKey {
 public:
  // Reads the PEM private key at `path`, or creates one there (O_EXCL, mode 0600, never
  // through a link) when none exists; then writes its public half to `path`.pub (0644)
  // for the agents. A file that is not an Ed25519 key is an error naming it.
  static Result<std::shared_ptr<SigningKey>> LoadOrCreate(const std::string& path);
  ~SigningKey();
  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;

  // The 64-byte signature of `message`, as 128 lowercase hex digits.
  Result<std::string> Sign(std::string_view message) const;
  const std::string& public_key_pem() const { return public_pem_; }

 private:
  SigningKey() = default;
  void* pkey_ = nullptr;  // EVP_PKEY*
  std::string public_pem_;
};

// An Ed25519 public key: what agents verify with.
class VerifyKey {
 public:
  static Result<std::shared_ptr<VerifyKey>> Load(const std::string& path);
  static Result<std::shared_ptr<VerifyKey>> FromPem(const std::string& pem, const std::string& what);
  ~VerifyKey();
  VerifyKey(const VerifyKey&) = delete;
  VerifyKey& operator=(const VerifyKey&) = delete;
  bool Verify(std::string_view message, std::string_view hex_signature) const;
  const std::string& pem() const { return pem_; }  // handed to the workers (JobMessage)

 private:
  VerifyKey() = default;
  void* pkey_ = nullptr;  // EVP_PKEY*
  std::string pem_;
};

// `value` (a JSON object) with its signature for `key`, made at wall time `at`.
Result<std::string> SignRecord(const SigningKey& key, const std::string& store_key, const std::string& value,
                               double at);

// Checks the signature of `value` read at `store_key`: InvalidArgument saying why (no
// signature, not the head's, not for this key) when it fails; the signing time when it
// holds.
Result<double> VerifyRecord(const VerifyKey& key, const std::string& store_key, const std::string& value);

// A reader's view of signed keys: refuses what VerifyRecord refuses, and a record signed
// earlier than one it already accepted at the same key (or, for `once_only` prefixes,
// a signature it has already accepted: commands are run once). Logs each refusal once
// per distinct value. Not thread-safe.
class SignedReader {
 public:
  SignedReader(std::shared_ptr<const VerifyKey> key, std::string who) : key_(std::move(key)), who_(std::move(who)) {}
  // True when `value` at `store_key` may be acted on.
  bool Accept(const std::string& store_key, const std::string& value, bool once_only = false);

 private:
  std::shared_ptr<const VerifyKey> key_;
  std::string who_;
  std::map<std::string, double> newest_;  // key -> the latest signing time accepted there
  std::set<std::string> used_;            // once_only signatures already accepted
  std::set<std::string> refused_;         // values already logged as refused
};

// A Store that signs what it writes at the keys `signed_key` picks (the head's store).
std::shared_ptr<Store> MakeSigningStore(std::shared_ptr<Store> inner, std::shared_ptr<const SigningKey> key,
                                        std::function<bool(const std::string&)> signed_key);

// A Store whose reads (Get) of the keys `checked` picks verify the head's signature:
// FailedPrecondition naming the key and why when it fails (what the head's API reads:
// a spec or plan forged into the store is reported as such, never shown as the job's).
std::shared_ptr<Store> MakeVerifyingStore(std::shared_ptr<Store> inner, std::shared_ptr<const VerifyKey> key,
                                          std::function<bool(const std::string&)> checked);

}  // namespace elastrain
