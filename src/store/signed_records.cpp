#include "store/signed_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/clock.h"
#include "common/files.h"
#include "common/log.h"
#include "common/safe_path.h"
#include "common/secret_file.h"

namespace elastrain {
namespace {

using json = nlohmann::json;
constexpr size_t kSignatureBytes = 64;
constexpr size_t kMaxKeyFileBytes = 16 * 1024;
constexpr char kField[] = "signature";

EVP_PKEY* P(void* p) { return static_cast<EVP_PKEY*>(p); }

std::string Hex(const unsigned char* b, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[b[i] >> 4];
    s[2 * i + 1] = d[b[i] & 15];
  }
  return s;
}

bool Unhex(std::string_view s, std::vector<unsigned char>* out) {
  auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (s.size() % 2) return false;
  out->resize(s.size() / 2);
  for (size_t i = 0; i < out->size(); ++i) {
    const int hi = v(s[2 * i]), lo = v(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

std::string Message(const std::string& store_key, double at, const json& body) {
  return fmt::format("elastrain-signed-v1\n{}\n{:.6f}\n{}", store_key, at, body.dump());
}

// `follow`: through links (a mounted secret's ..data/ links; checked by the caller).
Result<std::string> ReadKeyFile(const std::string& path, const std::string& what, bool follow = false) {
  UniqueFd f(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW)));
  if (f.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{} {}: no such file", what, path));
    return Status::IOError(fmt::format("cannot open {} {}: {}", what, path, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::InvalidArgument(fmt::format("{} {}: not a regular file; expected a PEM Ed25519 key", what, path));
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(f.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxKeyFileBytes)
      return Status::InvalidArgument(fmt::format("{} {}: over {} bytes; expected a PEM Ed25519 key", what, path,
                                                 kMaxKeyFileBytes));
  }
  return text;
}

std::string PublicPem(EVP_PKEY* pkey) {
  BIO* bio = BIO_new(BIO_s_mem());
  std::string pem;
  if (bio && PEM_write_bio_PUBKEY(bio, pkey) == 1) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    if (n > 0) pem.assign(data, static_cast<size_t>(n));
  }
  BIO_free(bio);
  return pem;
}


}  // namespace

// ---------------------------------------------------------------- keys
SigningKey::~SigningKey() { EVP_PKEY_free(P(pkey_)); }

Result<std::shared_ptr<SigningKey>> SigningKey::LoadOrCreate(const std::string& path) {
  std::shared_ptr<SigningKey> k(new SigningKey());
  const std::string what = "the head's signing key " + path;
  // A mounted secret (a Kubernetes Secret: read-only, reached through links, 0440 for the
  // pod's group) is read as mounted (common/secret_file.h); else a file of our own, 0600.
  bool mounted = false;
  struct stat lst {};
  if (lstat(path.c_str(), &lst) == 0) {
    auto m = CheckMountedSecretPath(path, what);
    if (!m.ok()) return m.status();
    mounted = m.value();
  }
  auto text = ReadKeyFile(path, "the head's signing key", mounted);
  if (!text.ok() && text.status().code() != StatusCode::kNotFound) return text.status();
  if (text.ok()) {
    struct stat st {};
    if (!mounted && stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
      return Status::PermissionDenied(fmt::format("the head's signing key {} is readable by others (mode {:o}); "
                                                  "expected 0600: chmod 600 it",
                                                  path, st.st_mode & 0777));
    BIO* bio = BIO_new_mem_buf(text->data(), static_cast<int>(text->size()));
    k->pkey_ = bio ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
    BIO_free(bio);
    if (!k->pkey_ || EVP_PKEY_id(P(k->pkey_)) != EVP_PKEY_ED25519)
      return Status::InvalidArgument(fmt::format("the head's signing key {}: not a PEM Ed25519 private key", path));
  } else {
    // Its directory, private, when missing (as the head's token's: ~/.elastrain).
    const std::string dir = path.find('/') == std::string::npos ? "" : path.substr(0, path.rfind('/'));
    if (!dir.empty() && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::IOError(fmt::format("cannot create the directory {} of the head's signing key: {}", dir,
                                         std::strerror(errno)));
    EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
    EVP_PKEY* pkey = nullptr;
    const bool made = ctx && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &pkey) == 1;
    EVP_PKEY_CTX_free(ctx);
    if (!made) return Status::Internal("cannot make an Ed25519 key (OpenSSL)");
    k->pkey_ = pkey;
    BIO* bio = BIO_new(BIO_s_mem());
    std::string pem;
    if (bio && PEM_write_bio_PrivateKey(bio, pkey, nullptr, nullptr, 0, nullptr, nullptr) == 1) {
      char* data = nullptr;
      const long n = BIO_get_mem_data(bio, &data);
      if (n > 0) pem.assign(data, static_cast<size_t>(n));
    }
    BIO_free(bio);
    if (pem.empty()) return Status::Internal("cannot encode the new signing key (OpenSSL)");
    ELASTRAIN_ASSIGN_OR_RETURN(bool created, CreateFileExclusive(path, pem, 0600, "the head's signing key"));
    if (!created) return LoadOrCreate(path);  // another head made it first (or a link is there: refused then)
  }
  k->public_pem_ = PublicPem(P(k->pkey_));
  if (k->public_pem_.empty()) return Status::Internal("cannot encode the signing key's public half (OpenSSL)");
  // A mounted key's directory is read-only: the agents get the public key as a secret of
  // their own (deploy/kubernetes/make-secrets.sh writes both).
  if (mounted) return k;
  const std::string pub = path + ".pub";
  auto existing = ReadKeyFile(pub, "the head's public key");
  if (!existing.ok() || *existing != k->public_pem_) {
    if (existing.ok() || existing.status().code() != StatusCode::kNotFound) unlink(pub.c_str());
    ELASTRAIN_ASSIGN_OR_RETURN(bool made, CreateFileExclusive(pub, k->public_pem_, 0644, "the head's public key"));
    if (!made) return Status::IOError("cannot create the head's public key " + pub + ": something else is there");
  }
  return k;
}

Result<std::string> SigningKey::Sign(std::string_view message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char sig[kSignatureBytes];
  size_t n = sizeof(sig);
  const bool ok = ctx && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, P(pkey_)) == 1 &&
                  EVP_DigestSign(ctx, sig, &n, reinterpret_cast<const unsigned char*>(message.data()),
                                 message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || n != kSignatureBytes) return Status::Internal("Ed25519 signing failed (OpenSSL)");
  return Hex(sig, n);
}

VerifyKey::~VerifyKey() { EVP_PKEY_free(P(pkey_)); }

Result<std::shared_ptr<VerifyKey>> VerifyKey::FromPem(const std::string& pem, const std::string& what) {
  std::shared_ptr<VerifyKey> k(new VerifyKey());
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  k->pkey_ = bio ? PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  if (!k->pkey_ || EVP_PKEY_id(P(k->pkey_)) != EVP_PKEY_ED25519)
    return Status::InvalidArgument(what + ": not a PEM Ed25519 public key (the head writes one beside its signing "
                                          "key, as KEY.pub)");
  k->pem_ = pem;
  return k;
}

Result<std::shared_ptr<VerifyKey>> VerifyKey::Load(const std::string& path) {
  // Links followed: no secret (a mounted Secret or ConfigMap reaches it through links).
  ELASTRAIN_ASSIGN_OR_RETURN(std::string pem, ReadKeyFile(path, "the head's public key", /*follow=*/true));
  return FromPem(pem, "the head's public key " + path);
}

bool VerifyKey::Verify(std::string_view message, std::string_view hex_signature) const {
  std::vector<unsigned char> sig;
  if (hex_signature.size() != 2 * kSignatureBytes || !Unhex(hex_signature, &sig)) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, P(pkey_)) == 1 &&
                  EVP_DigestVerify(ctx, sig.data(), sig.size(), reinterpret_cast<const unsigned char*>(message.data()),
                                   message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

// ---------------------------------------------------------------- records
Result<std::string> SignRecord(const SigningKey& key, const std::string& store_key, const std::string& value,
                               double at) {
  json body = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return Status::InvalidArgument(store_key + ": only a JSON object can be signed");
  body.erase(kField);
  ELASTRAIN_ASSIGN_OR_RETURN(std::string sig, key.Sign(Message(store_key, at, body)));
  body[kField] = {{"by", "ed25519"}, {"at", at}, {"sig", sig}};
  return body.dump();
}

Result<double> VerifyRecord(const VerifyKey& key, const std::string& store_key, const std::string& value) {
  json body = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return Status::InvalidArgument(store_key + ": not a JSON object");
  auto s = body.find(kField);
  if (s == body.end()) return Status::InvalidArgument(store_key + ": unsigned (the head signs every record there)");
  if (!s->is_object() || !s->contains("at") || !(*s)["at"].is_number() || !s->contains("sig") ||
      !(*s)["sig"].is_string() || s->value("by", std::string()) != "ed25519")
    return Status::InvalidArgument(store_key + ": a malformed signature (expected by, at and sig)");
  const double at = (*s)["at"].get<double>();
  const std::string sig = (*s)["sig"].get<std::string>();
  body.erase(kField);
  if (!key.Verify(Message(store_key, at, body), sig))
    return Status::InvalidArgument(store_key + ": the signature is not the head's for this record at this key "
                                               "(forged, altered or moved)");
  return at;
}

bool SignedReader::Accept(const std::string& store_key, const std::string& value, bool once_only) {
  auto refuse = [&](const std::string& why) {
    if (refused_.insert(store_key + "\n" + value).second)
      LOG_WARN("{}: refused {}: {}", who_, store_key, why);
    if (refused_.size() > 1024) refused_.clear();
    return false;
  };
  auto at = VerifyRecord(*key_, store_key, value);
  if (!at.ok()) return refuse(at.status().message());
  auto it = newest_.find(store_key);
  if (it != newest_.end() && *at < it->second)
    return refuse(fmt::format("signed at {:.6f}, before the record accepted there (signed at {:.6f}): a replay",
                              *at, it->second));
  if (once_only) {
    const std::string id = store_key + fmt::format("@{:.6f}", *at);
    if (!used_.insert(id).second) return refuse("already run once: a replay");
  }
  newest_[store_key] = *at;
  return true;
}

// ---------------------------------------------------------------- the head's store
namespace {

class SigningStore : public ForwardingStore {
 public:
  SigningStore(std::shared_ptr<Store> inner, std::shared_ptr<const SigningKey> key,
               std::function<bool(const std::string&)> signed_key)
      : ForwardingStore(std::move(inner)), key_(std::move(key)), signed_key_(std::move(signed_key)) {}
  Result<int64_t> Put(const std::string& key, const std::string& value, LeaseId lease) override {
    ELASTRAIN_ASSIGN_OR_RETURN(std::string v, Signed(key, value));
    return inner().Put(key, v, lease);
  }
  Result<bool> CompareAndSwap(const std::string& key, int64_t expected, const std::string& value,
                              LeaseId lease) override {
    ELASTRAIN_ASSIGN_OR_RETURN(std::string v, Signed(key, value));
    return inner().CompareAndSwap(key, expected, v, lease);
  }
  Result<bool> PutIf(const std::vector<StoreGuard>& guards, const std::string& key, const std::string& value,
                     LeaseId lease) override {
    ELASTRAIN_ASSIGN_OR_RETURN(std::string v, Signed(key, value));
    return inner().PutIf(guards, key, v, lease);
  }

 private:
  Result<std::string> Signed(const std::string& key, const std::string& value) {
    if (!signed_key_(key)) return value;
    // Strictly increasing signing times, even within one clock tick: a reader refuses a
    // record signed before the one it accepted at the same key.
    double at = WallSeconds();
    {
      std::lock_guard<std::mutex> lock(mu_);
      at = std::max(at, last_at_ + 1e-6);
      last_at_ = at;
    }
    return SignRecord(*key_, key, value, at);
  }

  std::shared_ptr<const SigningKey> key_;
  std::function<bool(const std::string&)> signed_key_;
  std::mutex mu_;
  double last_at_ = 0;
};

class VerifyingStore : public ForwardingStore {
 public:
  VerifyingStore(std::shared_ptr<Store> inner, std::shared_ptr<const VerifyKey> key,
                 std::function<bool(const std::string&)> checked)
      : ForwardingStore(std::move(inner)), key_(std::move(key)), checked_(std::move(checked)) {}
  Result<std::optional<KeyValue>> Get(const std::string& key) override {
    ELASTRAIN_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, inner().Get(key));
    if (kv && checked_(key)) {
      auto at = VerifyRecord(*key_, key, kv->value);
      if (!at.ok())
        return Status::FailedPrecondition(at.status().message() +
                                          " -- not written by this head (forged into the store?): refused");
    }
    return kv;
  }

 private:
  std::shared_ptr<const VerifyKey> key_;
  std::function<bool(const std::string&)> checked_;
};

}  // namespace

std::shared_ptr<Store> MakeVerifyingStore(std::shared_ptr<Store> inner, std::shared_ptr<const VerifyKey> key,
                                          std::function<bool(const std::string&)> checked) {
  return std::make_shared<VerifyingStore>(std::move(inner), std::move(key), std::move(checked));
}

std::shared_ptr<Store> MakeSigningStore(std::shared_ptr<Store> inner, std::shared_ptr<const SigningKey> key,
                                        std::function<bool(const std::string&)> signed_key) {
  return std::make_shared<SigningStore>(std::move(inner), std::move(key), std::move(signed_key));
}

}  // namespace elastrain
