// The etcd store: Store over etcd v3's JSON gateway (grpc-gateway at /v3/...), with
// cpp-httplib as the HTTP client. One POST per call; keys and values travel as base64
// (proto `bytes`), int64 fields as JSON strings, and absent fields mean 0 or empty
// (proto3 omits defaults), so every read below defaults missing fields.
// etcds:// is the same over HTTPS (server verification always on). With a user, each
// request carries etcd's auth token in the Authorization header (the gateway passes it
// on as gRPC metadata); the token is fetched once from /v3/auth/authenticate and fetched
// again when etcd calls it invalid (simple tokens expire after --auth-token-ttl idle).
#include <httplib.h>
#include <openssl/err.h>
#include <signal.h>
#include <openssl/x509.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "common/log.h"
#include "store/etcd_codec.h"
#include "store/etcd_credentials.h"
#include "store/store.h"
#include "common/signals.h"

namespace elastrain {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// gRPC status codes as the gateway reports them in {"code": N}.
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcPermissionDenied = 7;
constexpr int kGrpcUnauthenticated = 16;  // "etcdserver: invalid auth token" (expired)

Status FromGrpcCode(int code, std::string msg) {
  switch (code) {
    case 3: return Status::InvalidArgument(std::move(msg));   // e.g. request too large
    case 4: return Status::DeadlineExceeded(std::move(msg));
    case 5: return Status::NotFound(std::move(msg));          // e.g. lease not found
    case 7: return Status::FailedPrecondition(std::move(msg));  // permission denied
    case 9: return Status::FailedPrecondition(std::move(msg));
    case 14: return Status::Unavailable(std::move(msg));      // e.g. no leader
    case 16: return Status::FailedPrecondition(std::move(msg));  // unauthenticated
    default: return Status::Internal(std::move(msg));
  }
}

// The last OpenSSL error of this thread ("wrong version number", "tlsv13 alert
// certificate required"...), or "" when there is none; clears the queue.
std::string LastTlsError() {
  unsigned long e = 0, last = 0;
  while ((e = ::ERR_get_error()) != 0) last = e;
  if (last == 0) return "";
  const char* reason = ::ERR_reason_error_string(last);
  return reason ? reason : "";
}

// "host" or "[v6]" for a URL.
std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// The most an answer of etcd may hold: far above elastrain's records (etcd's own limit
// on a request is 1.5 MiB), low enough that a hostile endpoint cannot exhaust memory.
constexpr size_t kMaxResponseBytes = size_t{64} << 20;

class EtcdStore : public Store {
 public:
  EtcdStore(std::string host, int port, StoreOptions opt, bool tls, EtcdCredentials creds)
      : host_(std::move(host)), port_(port), opt_(std::move(opt)), tls_(tls), creds_(std::move(creds)),
        url_((tls_ ? "etcds://" : "etcd://") + UrlHost(host_) + ":" + std::to_string(port_)) {}

  // A client for this store, checked: with TLS, the client certificate and key load.
  Result<std::unique_ptr<httplib::Client>> NewClient() const {
    std::unique_ptr<httplib::Client> cli;
    if (!tls_) {
      cli = std::make_unique<httplib::Client>(host_, port_);
    } else {
      cli = std::make_unique<httplib::Client>("https://" + UrlHost(host_) + ":" + std::to_string(port_),
                                              creds_.cert_file, creds_.key_file);
      if (!cli->is_valid()) {
        const std::string tls = LastTlsError();
        return Status::InvalidArgument(url_ + ": cannot load the client certificate '" + creds_.cert_file +
                                       "' with key '" + creds_.key_file + "'" + (tls.empty() ? "" : " (" + tls + ")") +
                                       ": expected a PEM certificate and its matching private key");
      }
      cli->enable_server_certificate_verification(true);
      if (!creds_.ca_file.empty()) cli->set_ca_cert_path(creds_.ca_file);
    }
    cli->set_connection_timeout(opt_.request_timeout);
    cli->set_read_timeout(opt_.request_timeout);
    cli->set_write_timeout(opt_.request_timeout);
    // Header and body go out as two writes; without this, Nagle holds the body back
    // until the server's delayed ACK (~40 ms per request).
    cli->set_tcp_nodelay(true);
    return cli;
  }

  std::string url() const override { return url_; }

  Result<std::optional<KeyValue>> Get(const std::string& key) override {
    const std::string what = "get key '" + Printable(key) + "'";
    ELASTRAIN_ASSIGN_OR_RETURN(json r, Call("/v3/kv/range", {{"key", Base64Encode(key)}}, what));
    ELASTRAIN_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, ParseKvs(r, what));
    if (kvs.empty()) return std::optional<KeyValue>();
    return std::optional<KeyValue>(std::move(kvs.front()));
  }

  Result<std::vector<KeyValue>> List(const std::string& prefix) override {
    const std::string what = "list prefix '" + Printable(prefix) + "'";
    // etcd returns a range sorted by key (ascending) unless asked otherwise.
    ELASTRAIN_ASSIGN_OR_RETURN(
        json r, Call("/v3/kv/range",
                     {{"key", Base64Encode(PrefixStart(prefix))}, {"range_end", Base64Encode(PrefixEnd(prefix))}},
                     what));
    return ParseKvs(r, what);
  }

  Result<int64_t> Put(const std::string& key, const std::string& value, LeaseId lease) override {
    ELASTRAIN_ASSIGN_OR_RETURN(json r, Call("/v3/kv/put", PutRequest(key, value, lease),
                                            "put key '" + Printable(key) + "'" + LeaseNote(lease)));
    return Int(r.value("header", json::object()), "revision");
  }

  // A compare of a transaction: `key` at `mod_revision`. "Must not exist" compares the
  // create revision with 0; otherwise the mod revision.
  static json Compare(const std::string& key, int64_t mod_revision) {
    json cmp = {{"key", Base64Encode(key)}, {"result", "EQUAL"}};
    if (mod_revision == 0) {
      cmp["target"] = "CREATE";
      cmp["create_revision"] = "0";
    } else {
      cmp["target"] = "MOD";
      cmp["mod_revision"] = std::to_string(mod_revision);
    }
    return cmp;
  }

  Result<bool> PutIf(const std::vector<StoreGuard>& guards, const std::string& key, const std::string& value,
                     LeaseId lease) override {
    json compares = json::array();
    std::string what = "put key '" + Printable(key) + "'" + LeaseNote(lease) + " if";
    for (const StoreGuard& g : guards) {
      compares.push_back(Compare(g.key, g.mod_revision));
      what += " '" + Printable(g.key) + "' at mod_revision " + std::to_string(g.mod_revision);
    }
    json txn = {{"compare", compares}, {"success", json::array({{{"request_put", PutRequest(key, value, lease)}}})}};
    ELASTRAIN_ASSIGN_OR_RETURN(json r, Call("/v3/kv/txn", txn, what));
    return r.value("succeeded", false);  // proto3 omits false
  }

  Result<bool> CompareAndSwap(const std::string& key, int64_t expected, const std::string& value,
                              LeaseId lease) override {
    json txn = {{"compare", json::array({Compare(key, expected)})},
                {"success", json::array({{{"request_put", PutRequest(key, value, lease)}}})}};
    ELASTRAIN_ASSIGN_OR_RETURN(
        json r, Call("/v3/kv/txn", txn,
                     "compare-and-swap key '" + Printable(key) + "' at mod_revision " +
                         std::to_string(expected) + LeaseNote(lease)));
    // proto3 omits false, so a failed comparison has no "succeeded" at all.
    return r.value("succeeded", false);
  }

  Status Delete(const std::string& key) override {
    return Call("/v3/kv/deleterange", {{"key", Base64Encode(key)}}, "delete key '" + Printable(key) + "'")
        .status();
  }

  Status DeletePrefix(const std::string& prefix) override {
    return Call("/v3/kv/deleterange",
                {{"key", Base64Encode(PrefixStart(prefix))}, {"range_end", Base64Encode(PrefixEnd(prefix))}},
                "delete prefix '" + Printable(prefix) + "'")
        .status();
  }

  Result<LeaseId> GrantLease(milliseconds ttl) override {
    // Whole seconds, rounded up; etcd may still raise it to its minimum TTL.
    const int64_t secs = std::max<int64_t>(1, (ttl.count() + 999) / 1000);
    const std::string what = "grant lease of " + std::to_string(ttl.count()) + " ms";
    ELASTRAIN_ASSIGN_OR_RETURN(json r, Call("/v3/lease/grant", {{"TTL", secs}}, what));
    const std::string err = Str(r, "error");
    const LeaseId id = Int(r, "ID");
    if (!err.empty() || id == 0)
      return Status::Internal(url_ + ": " + what + ": " + (err.empty() ? "no lease ID in the answer" : err));
    return id;
  }

  Status KeepAlive(LeaseId lease) override {
    const std::string what = "keep lease " + std::to_string(lease) + " alive";
    ELASTRAIN_ASSIGN_OR_RETURN(json r, Call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}, what));
    // The gateway answers an unknown lease with a result without TTL (or TTL <= 0),
    // not with an error.
    if (Int(r.value("result", json::object()), "TTL") <= 0)
      return Status::NotFound(url_ + ": " + what + ": lease not found (expired or revoked)");
    return Status::OK();
  }

  Status RevokeLease(LeaseId lease) override {
    Status st = Call("/v3/lease/revoke", {{"ID", std::to_string(lease)}},
                     "revoke lease " + std::to_string(lease))
                    .status();
    // Already gone is what the caller wanted (and what the memory store does).
    if (st.code() == StatusCode::kNotFound) return Status::OK();
    return st;
  }

  Result<int64_t> Revision() override {
    // The cheapest read there is: count the keys of the scope (every answer's header
    // carries the store's revision), or one key ("\0", which nobody uses) without one.
    json range = {{"key", Base64Encode(PrefixStart(opt_.key_scope))}, {"count_only", true}};
    if (!opt_.key_scope.empty()) range["range_end"] = Base64Encode(PrefixEnd(opt_.key_scope));
    ELASTRAIN_ASSIGN_OR_RETURN(json r, Call("/v3/kv/range", range, "read the revision"));
    return Int(r.value("header", json::object()), "revision");
  }

  Result<int64_t> WaitForChange(int64_t after, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    ELASTRAIN_ASSIGN_OR_RETURN(int64_t rev, Revision());
    if (rev > after || timeout <= milliseconds(0)) return rev;
    // A watch blocks in etcd until something changes, so waiting costs no requests;
    // polling (a revision read every poll_interval) is the fallback when it fails.
    // A watch cancelled for an expired token is set up again once with a fresh one.
    for (int attempt = 0; attempt < 2; ++attempt) {
      ELASTRAIN_ASSIGN_OR_RETURN(std::string token, Token());
      bool unauthenticated = false;
      const Status watched = Watch(rev, timeout, token, &unauthenticated);
      if (watched.ok()) return Revision();
      if (!unauthenticated) break;
      DropToken(token);
    }
    for (;;) {
      ELASTRAIN_ASSIGN_OR_RETURN(rev, Revision());
      const auto now = Clock::now();
      if (rev > after || now >= deadline) return rev;
      std::this_thread::sleep_for(std::min<Clock::duration>(opt_.poll_interval, deadline - now));
    }
  }

 private:
  // Watches the scope (or the whole keyspace) from revision `from` + 1 and returns once
  // an event comes or `timeout` passes (both OK); an error when the watch could not be
  // set up (`*unauthenticated` when etcd refused the token). The
  // gateway streams one JSON object per line ({"result": {"created": true}} first, then
  // {"result": {"events": [...]}}); the stream is cut at the first event, and a wait
  // without one ends as a read timeout. Each watch has its own connection, dropped after.
  Status Watch(int64_t from, milliseconds timeout, const std::string& token, bool* unauthenticated) {
    const json create = {{"create_request",
                          {{"key", Base64Encode(PrefixStart(opt_.key_scope))},
                           {"range_end", Base64Encode(PrefixEnd(opt_.key_scope))},
                           {"start_revision", std::to_string(from + 1)}}}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v3/watch";
    req.body = create.dump();
    req.headers.emplace("Content-Type", "application/json");
    if (!token.empty()) req.headers.emplace("Authorization", token);
    int http = 0;
    bool created = false, changed = false;
    std::string error, line;
    req.response_handler = [&](const httplib::Response& r) {
      http = r.status;
      return http == 200;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (line.size() + n > kMaxResponseBytes) {
        error = "a watch message exceeds the size limit";
        return false;
      }
      line.append(data, n);
      for (size_t nl; (nl = line.find('\n')) != std::string::npos; line.erase(0, nl + 1)) {
        const json msg = json::parse(line.substr(0, nl), nullptr, /*allow_exceptions=*/false);
        const json result = msg.is_object() ? msg.value("result", json::object()) : json::object();
        if (!msg.is_object() || msg.contains("error") || result.value("canceled", false)) {
          error = Printable(line.substr(0, std::min<size_t>(nl, 300)));
          // {"result": {"canceled": true, "cancel_reason": "rpc error: code = Unauthenticated ..."}}
          if (result.value("cancel_reason", "").find("Unauthenticated") != std::string::npos) *unauthenticated = true;
          return false;
        }
        if (result.value("created", false)) created = true;
        if (result.contains("events")) changed = true;
      }
      return !changed;  // false: cut the stream, the caller re-reads
    };
    ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<httplib::Client> cli, NewClient());
    cli->set_read_timeout(timeout);
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    (void)cli->send(req, res, err);
    // After `created`, a read error is the timeout (or a lost connection: the caller's
    // next read reports that).
    if (changed || (created && err == httplib::Error::Read)) return Status::OK();
    return Status::Unavailable(url_ + ": watch from revision " + std::to_string(from + 1) + " failed (HTTP " +
                               std::to_string(http) + ", " + httplib::to_string(err) +
                               (error.empty() ? "" : ", '" + error + "'") + ")");
  }

  json PutRequest(const std::string& key, const std::string& value, LeaseId lease) const {
    json put = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
    if (lease != 0) put["lease"] = std::to_string(lease);
    return put;
  }
  static std::string LeaseNote(LeaseId lease) {
    return lease == 0 ? "" : " with lease " + std::to_string(lease);
  }

  Result<std::vector<KeyValue>> ParseKvs(const json& r, const std::string& what) const {
    std::vector<KeyValue> out;
    auto it = r.find("kvs");
    if (it == r.end() || !it->is_array()) return out;
    for (const json& kv : *it) {
      auto key = Base64Decode(Str(kv, "key"));
      auto value = Base64Decode(Str(kv, "value"));
      if (!key || !value)
        return Status::Corruption(url_ + ": " + what + ": etcd sent a key or value that is not base64: " +
                                  kv.dump().substr(0, 200));
      out.push_back({std::move(*key), std::move(*value), Int(kv, "create_revision"), Int(kv, "mod_revision"),
                     Int(kv, "lease")});
    }
    return out;
  }

  // httplib::Client is not safe for concurrent requests, and the agent and controller
  // threads share a store: each call borrows an idle client (keeping its connection
  // alive for the next call) or makes one, so calls never queue behind each other.
  Result<std::unique_ptr<httplib::Client>> TakeClient() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto cli = std::move(idle_.back());
        idle_.pop_back();
        return cli;
      }
    }
    ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<httplib::Client> cli, NewClient());
    cli->set_keep_alive(true);
    return cli;
  }
  void ReturnClient(std::unique_ptr<httplib::Client> cli) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleClients) idle_.push_back(std::move(cli));
  }

  // The auth token to send: "" without a user; else the one held, or a fresh one from
  // /v3/auth/authenticate (one at a time: threads that find none wait for it).
  Result<std::string> Token() {
    if (creds_.user.empty()) return std::string();
    std::lock_guard<std::mutex> lock(auth_mu_);
    if (!token_.empty()) return token_;
    const std::string what = "authenticate as etcd user '" + creds_.user + "'";
    int code = 0;
    // The request holds the password: it is never logged, and no error repeats it.
    Result<json> r = Post("/v3/auth/authenticate", {{"name", creds_.user}, {"password", creds_.password}}, what,
                          /*token=*/"", &code);
    if (!r.ok()) {
      if (code == kGrpcInvalidArgument)
        return Status::FailedPrecondition(r.status().message() + "; hint: check --store-user/" + kEnvEtcdUser +
                                          " and the password in --store-password-file/" + kEnvEtcdPasswordFile);
      return r.status();
    }
    token_ = Str(*r, "token");
    if (token_.empty()) return Status::Internal(url_ + ": " + what + ": etcd answered without a token");
    LOG_DEBUG("store: {}: authenticated as etcd user '{}'", url_, creds_.user);
    return token_;
  }
  // Forgets `stale` (etcd refused it) unless another thread already replaced it.
  void DropToken(const std::string& stale) {
    std::lock_guard<std::mutex> lock(auth_mu_);
    if (token_ == stale) token_.clear();
  }

  // POSTs `request` to `path` with the auth token, once more with a fresh token when
  // etcd says the token is invalid (expired); the parsed answer or a Status naming the
  // URL and `what`.
  Result<json> Call(const char* path, const json& request, const std::string& what) {
    for (int attempt = 0;; ++attempt) {
      ELASTRAIN_ASSIGN_OR_RETURN(std::string token, Token());
      int code = 0;
      Result<json> r = Post(path, request, what, token, &code);
      if (code != kGrpcUnauthenticated || token.empty() || attempt > 0) return r;
      LOG_DEBUG("store: {}: the auth token expired; authenticating again", url_);
      DropToken(token);
    }
  }

  // Why a request got no answer, with a hint for the usual TLS mistakes.
  Status TransportError(httplib::Error err, const httplib::Client& cli, const char* path, const std::string& what,
                        Clock::time_point start, const std::string& tls_error) const {
    std::string detail = httplib::to_string(err) + " error on POST " + path;
    if (!tls_error.empty()) detail += ": " + tls_error;
    const std::string plain = "http://" + UrlHost(host_) + ":" + std::to_string(port_);
    switch (err) {
      case httplib::Error::Connection:
      case httplib::Error::ConnectionTimeout:
        return Status::Unavailable(url_ + ": cannot reach etcd (" + detail + ", " + what +
                                   "); is etcd running? hint: start one with 'etcd --listen-client-urls " + plain +
                                   " --advertise-client-urls " + plain + "' (https:// and certificates for etcds://, "
                                   "docs/etcd-tls.md) or pass the right --store");
      case httplib::Error::SSLServerVerification: {
        const long verify = cli.get_openssl_verify_result();
        if (verify != X509_V_OK)
          return Status::FailedPrecondition(
              url_ + ": " + what + ": etcd's certificate failed verification (" +
              ::X509_verify_cert_error_string(verify) + "); hint: --store-ca/" + kEnvEtcdCa +
              " must be the CA that signed etcd's certificate" +
              (creds_.ca_file.empty() ? " (none given: the system's CAs were used)" : " (given: '" + creds_.ca_file + "')"));
        return Status::FailedPrecondition(url_ + ": " + what + ": etcd's certificate is not valid for host '" + host_ +
                                          "': its subjectAltName must name the host of the --store URL");
      }
      case httplib::Error::SSLLoadingCerts:
        return Status::InvalidArgument(url_ + ": cannot load the CA file '" + creds_.ca_file + "' (" + detail +
                                       "): expected PEM certificates");
      case httplib::Error::SSLConnection:
        return Status::Unavailable(url_ + ": " + what + ": TLS handshake with etcd failed (" + detail +
                                   "); hint: a port that serves plain HTTP wants etcd://, not etcds://");
      default: break;
    }
    const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    if (elapsed >= opt_.request_timeout) {
      return Status::DeadlineExceeded(url_ + ": " + what + ": no answer from etcd within " +
                                      std::to_string(opt_.request_timeout.count()) + " ms (" + detail + ")");
    }
    std::string hint;
    if (tls_ && creds_.cert_file.empty())
      hint = "; hint: etcd may require a client certificate (--store-cert and --store-key, or " +
             std::string(kEnvEtcdCert) + " and " + kEnvEtcdKey + ")";
    else if (tls_)
      hint = "; hint: etcd may refuse the client certificate '" + creds_.cert_file +
             "' (is it signed by a CA in etcd's --trusted-ca-file?)";
    else
      hint = "; hint: a port that serves TLS closes plain HTTP connections: use etcds://";
    return Status::Unavailable(url_ + ": " + what + ": connection to etcd lost (" + detail + ")" + hint);
  }

  // One POST; the parsed answer or a Status naming the URL and `what`. `*grpc_code` is
  // etcd's gRPC code when etcd answered with an error, else 0.
  Result<json> Post(const char* path, const json& request, const std::string& what, const std::string& token,
                    int* grpc_code) {
    *grpc_code = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = request.dump();
    req.headers.emplace("Content-Type", "application/json");
    if (!token.empty()) req.headers.emplace("Authorization", token);  // etcd's form: no "Bearer"
    // The status and body are collected as they arrive rather than read from the
    // Response: etcd's gateway ends every error answer with an HTTP trailer
    // ("0\r\nGrpc-Trailer-Content-Type: ...\r\n\r\n") that httplib 0.11 cannot parse, so
    // it fails the read (Error::Read) only after the whole body has arrived.
    int http = 0;
    std::string text;
    req.response_handler = [&](const httplib::Response& r) {
      http = r.status;
      return true;
    };
    bool too_large = false;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (text.size() + n > kMaxResponseBytes) {
        too_large = true;
        return false;  // a store that answers without end is cut, not buffered
      }
      text.append(data, n);
      return true;
    };
    ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<httplib::Client> cli, TakeClient());
    const auto start = Clock::now();
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    (void)LastTlsError();  // start from an empty error queue: what follows is this request's
    const bool done = cli->send(req, res, err);
    if (too_large)
      return Status::Unavailable(url_ + ": " + what + ": the answer exceeds " +
                                 std::to_string(kMaxResponseBytes >> 20) + " MiB; refused");
    json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
    const bool trailer_only = !done && err == httplib::Error::Read && http != 0 && body.is_object();
    // The client is dropped: its connection is in an unknown state.
    if (!done && !trailer_only) return TransportError(err, *cli, path, what, start, LastTlsError());
    // After a trailer the connection is left mid-stream, so only a clean exchange
    // returns its client for reuse.
    if (done) ReturnClient(std::move(cli));
    // {"error": "...", "message": "...", "code": N}; a streaming endpoint (keepalive)
    // that fails after its headers went out sends HTTP 200 and a nested
    // {"error": {"grpc_code": N, "message": "..."}}.
    const bool nested = body.is_object() && body.contains("error") && body["error"].is_object();
    if (http != 200 || nested) {
      const json& error = nested ? body["error"] : body;
      if (!error.is_object() || (!error.contains("code") && !error.contains("grpc_code"))) {
        // Not etcd's JSON: with auth on, the gateway refuses in plain text any client
        // certificate that has a Common Name (it would not be used as the user).
        if (text.find("CommonName") != std::string::npos)
          return Status::FailedPrecondition(
              url_ + ": " + what + ": etcd refused the client certificate '" + creds_.cert_file + "' (HTTP " +
              std::to_string(http) + " '" + Printable(text.substr(0, 120)) +
              "'): with auth enabled, etcd's JSON gateway takes only client certificates without a Common "
              "Name; issue one with an empty subject CN and authenticate with --store-user (docs/etcd-tls.md)");
        return Status::FailedPrecondition(url_ + ": " + what + ": POST " + path + " answered HTTP " +
                                          std::to_string(http) + " '" + Printable(text.substr(0, 200)) +
                                          "': expected etcd >= 3.4's v3 JSON gateway");
      }
      const int code = static_cast<int>(error.contains("code") ? Int(error, "code") : Int(error, "grpc_code"));
      *grpc_code = code;
      const std::string msg = Str(error, "message");
      LOG_DEBUG("store: {}: {}: {} (gRPC code {})", url_, what, msg, code);
      std::string hint;
      if (code == kGrpcPermissionDenied)
        hint = creds_.user.empty() ? "; hint: etcd has authentication enabled: pass --store-user and --store-password-file"
                                   : "; hint: etcd user '" + creds_.user + "' needs a role with readwrite on the prefix '" +
                                         opt_.key_scope + "' (docs/etcd-tls.md)";
      else if (code == kGrpcInvalidArgument && msg.find("user name is empty") != std::string::npos)
        hint = "; hint: etcd has authentication enabled: pass --store-user and --store-password-file (or " +
               std::string(kEnvEtcdUser) + " and " + kEnvEtcdPasswordFile + ")";
      return FromGrpcCode(code, url_ + ": " + what + ": " + msg + " (gRPC code " + std::to_string(code) + ")" + hint);
    }
    if (!body.is_object()) {
      return Status::Corruption(url_ + ": " + what + ": POST " + path + " answered '" +
                                Printable(text.substr(0, 200)) + "': expected a JSON object");
    }
    return body;
  }

  static constexpr size_t kMaxIdleClients = 8;
  const std::string host_;
  const int port_;
  const StoreOptions opt_;
  const bool tls_;
  const EtcdCredentials creds_;
  const std::string url_;
  std::mutex mu_;
  std::vector<std::unique_ptr<httplib::Client>> idle_;  // GUARDED_BY(mu_)
  std::mutex auth_mu_;                                   // held while authenticating
  std::string token_;                                    // GUARDED_BY(auth_mu_); "" until fetched
};

}  // namespace

Result<std::shared_ptr<Store>> MakeEtcdStore(const std::string& host, int port, const StoreOptions& opt, bool tls) {
  const std::string scheme = tls ? "etcds://" : "etcd://";
  const std::string url = scheme + UrlHost(host) + ":" + std::to_string(port);
  if (host.empty()) return Status::InvalidArgument(url + ": empty host: expected " + scheme + "HOST:PORT");
  if (port < 1 || port > 65535)
    return Status::InvalidArgument(url + ": port " + std::to_string(port) + ": expected 1..65535");
  if (opt.request_timeout <= milliseconds(0) || opt.poll_interval <= milliseconds(0)) {
    return Status::InvalidArgument(url + ": request_timeout=" + std::to_string(opt.request_timeout.count()) +
                                   " ms, poll_interval=" + std::to_string(opt.poll_interval.count()) +
                                   " ms: expected both > 0");
  }
  ELASTRAIN_ASSIGN_OR_RETURN(EtcdCredentials creds, LoadEtcdCredentials(url, opt, tls));
  if (tls) IgnoreSigpipeOnce();
  auto store = std::make_shared<EtcdStore>(host, port, opt, tls, std::move(creds));
  // The certificate and key are loaded now, so a bad pair fails here, not at the first call.
  ELASTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<httplib::Client> probe, store->NewClient());
  return std::shared_ptr<Store>(std::move(store));
}

}  // namespace elastrain
