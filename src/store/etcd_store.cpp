// The etcd store: Store over etcd v3's JSON gateway (grpc-gateway at /v3/...), with
// cpp-httplib as the HTTP client. One POST per call; keys and values travel as base64
// (proto `bytes`), int64 fields as JSON strings, and absent fields mean 0 or empty
// (proto3 omits defaults), so every read below defaults missing fields.
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "common/log.h"
#include "store/store.h"

namespace elastrain {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// --- base64 (RFC 4648 with padding), what grpc-gateway uses for `bytes` ---------------

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], kB64[v & 63]};
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], '='};
  }
  return out;
}

int B64Digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // also accept the URL-safe alphabet
  if (c == '/' || c == '_') return 63;
  return -1;
}

// nullopt on a character outside the alphabet or a dangling single digit.
std::optional<std::string> Base64Decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int d = B64Digit(c);
    if (d < 0) return std::nullopt;
    acc = (acc << 6) | uint32_t(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) return std::nullopt;  // 1 digit left over: not a whole byte
  return out;
}

// ---------------------------------------------------------------------------------------

// etcd's prefix convention: range_end is the prefix with its last byte incremented
// (trailing 0xff bytes dropped first); "\0" means "to the end of the keyspace".
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    const auto c = static_cast<unsigned char>(prefix.back());
    if (c < 0xff) {
      prefix.back() = static_cast<char>(c + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// etcd rejects an empty key, so "every key" is the range ["\0", "\0"-meaning-end).
std::string PrefixStart(const std::string& prefix) { return prefix.empty() ? std::string(1, '\0') : prefix; }

// int64 fields arrive as strings ("42"); absent means 0.
int64_t Int(const json& obj, const char* field) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(field);
  if (it == obj.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return 0;
  const auto& s = it->get_ref<const std::string&>();
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string Str(const json& obj, const char* field) {
  if (!obj.is_object()) return "";
  auto it = obj.find(field);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// For messages: keys are text in practice, but a binary byte must not garble a log line.
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// gRPC status codes as the gateway reports them in {"code": N}.
Status FromGrpcCode(int code, std::string msg) {
  switch (code) {
    case 3: return Status::InvalidArgument(std::move(msg));   // e.g. request too large
    case 4: return Status::DeadlineExceeded(std::move(msg));
    case 5: return Status::NotFound(std::move(msg));          // e.g. lease not found
    case 9: return Status::FailedPrecondition(std::move(msg));
    case 14: return Status::Unavailable(std::move(msg));      // e.g. no leader
    default: return Status::Internal(std::move(msg));
  }
}

class EtcdStore : public Store {
 public:
  EtcdStore(std::string host, int port, StoreOptions opt)
      : host_(std::move(host)), port_(port), opt_(opt),
        url_("etcd://" + host_ + ":" + std::to_string(port_)) {}

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

  Result<bool> CompareAndSwap(const std::string& key, int64_t expected, const std::string& value,
                              LeaseId lease) override {
    // "Must not exist" compares the create revision with 0; otherwise the mod revision.
    json cmp = {{"key", Base64Encode(key)}, {"result", "EQUAL"}};
    if (expected == 0) {
      cmp["target"] = "CREATE";
      cmp["create_revision"] = "0";
    } else {
      cmp["target"] = "MOD";
      cmp["mod_revision"] = std::to_string(expected);
    }
    json txn = {{"compare", json::array({cmp})},
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
    // The cheapest read there is: count one key ("\0", which nobody uses).
    ELASTRAIN_ASSIGN_OR_RETURN(
        json r, Call("/v3/kv/range", {{"key", Base64Encode(std::string(1, '\0'))}, {"count_only", true}},
                     "read the revision"));
    return Int(r.value("header", json::object()), "revision");
  }

  Result<int64_t> WaitForChange(int64_t after, milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    ELASTRAIN_ASSIGN_OR_RETURN(int64_t rev, Revision());
    if (rev > after || timeout <= milliseconds(0)) return rev;
    // A watch blocks in etcd until something changes, so waiting costs no requests;
    // polling (a revision read every poll_interval) is the fallback when it fails.
    if (Watch(rev, timeout).ok()) return Revision();
    for (;;) {
      ELASTRAIN_ASSIGN_OR_RETURN(rev, Revision());
      const auto now = Clock::now();
      if (rev > after || now >= deadline) return rev;
      std::this_thread::sleep_for(std::min<Clock::duration>(opt_.poll_interval, deadline - now));
    }
  }

 private:
  // Watches the whole keyspace from revision `from` + 1 and returns once an event comes
  // or `timeout` passes (both OK); an error when the watch could not be set up. The
  // gateway streams one JSON object per line ({"result": {"created": true}} first, then
  // {"result": {"events": [...]}}); the stream is cut at the first event, and a wait
  // without one ends as a read timeout. Each watch has its own connection, dropped after.
  Status Watch(int64_t from, milliseconds timeout) {
    const json create = {{"create_request",
                          {{"key", Base64Encode(std::string(1, '\0'))},
                           {"range_end", Base64Encode(std::string(1, '\0'))},
                           {"start_revision", std::to_string(from + 1)}}}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v3/watch";
    req.body = create.dump();
    req.headers.emplace("Content-Type", "application/json");
    int http = 0;
    bool created = false, changed = false;
    std::string error, line;
    req.response_handler = [&](const httplib::Response& r) {
      http = r.status;
      return http == 200;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      line.append(data, n);
      for (size_t nl; (nl = line.find('\n')) != std::string::npos; line.erase(0, nl + 1)) {
        const json msg = json::parse(line.substr(0, nl), nullptr, /*allow_exceptions=*/false);
        const json result = msg.is_object() ? msg.value("result", json::object()) : json::object();
        if (!msg.is_object() || msg.contains("error") || result.value("canceled", false)) {
          error = Printable(line.substr(0, std::min<size_t>(nl, 200)));
          return false;
        }
        if (result.value("created", false)) created = true;
        if (result.contains("events")) changed = true;
      }
      return !changed;  // false: cut the stream, the caller re-reads
    };
    httplib::Client cli(host_, port_);
    cli.set_connection_timeout(opt_.request_timeout);
    cli.set_read_timeout(timeout);
    cli.set_write_timeout(opt_.request_timeout);
    cli.set_tcp_nodelay(true);
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    (void)cli.send(req, res, err);
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
  std::unique_ptr<httplib::Client> TakeClient() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto cli = std::move(idle_.back());
        idle_.pop_back();
        return cli;
      }
    }
    auto cli = std::make_unique<httplib::Client>(host_, port_);
    cli->set_connection_timeout(opt_.request_timeout);
    cli->set_read_timeout(opt_.request_timeout);
    cli->set_write_timeout(opt_.request_timeout);
    cli->set_keep_alive(true);
    // Header and body go out as two writes; without this, Nagle holds the body back
    // until the server's delayed ACK (~40 ms per request).
    cli->set_tcp_nodelay(true);
    return cli;
  }
  void ReturnClient(std::unique_ptr<httplib::Client> cli) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleClients) idle_.push_back(std::move(cli));
  }

  // POSTs `request` to `path`; the parsed answer or a Status naming the URL and `what`.
  Result<json> Call(const char* path, const json& request, const std::string& what) {
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = request.dump();
    req.headers.emplace("Content-Type", "application/json");
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
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      text.append(data, n);
      return true;
    };
    auto cli = TakeClient();
    const auto start = Clock::now();
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    const bool done = cli->send(req, res, err);
    json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
    const bool trailer_only = !done && err == httplib::Error::Read && http != 0 && body.is_object();
    if (!done && !trailer_only) {  // the client is dropped: its connection is in an unknown state
      const std::string detail = httplib::to_string(err) + " error on POST " + path;
      if (err == httplib::Error::Connection || err == httplib::Error::ConnectionTimeout) {
        return Status::Unavailable(url_ + ": cannot reach etcd (" + detail + ", " + what +
                                   "); is etcd running? hint: start one with 'etcd --listen-client-urls http://" +
                                   host_ + ":" + std::to_string(port_) + " --advertise-client-urls http://" +
                                   host_ + ":" + std::to_string(port_) + "' or pass the right --store");
      }
      const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
      if (elapsed >= opt_.request_timeout) {
        return Status::DeadlineExceeded(url_ + ": " + what + ": no answer from etcd within " +
                                        std::to_string(opt_.request_timeout.count()) + " ms (" + detail + ")");
      }
      return Status::Unavailable(url_ + ": " + what + ": connection to etcd lost (" + detail + ")");
    }
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
        return Status::FailedPrecondition(url_ + ": " + what + ": POST " + path + " answered HTTP " +
                                          std::to_string(http) + " '" + Printable(text.substr(0, 200)) +
                                          "': expected etcd >= 3.4's v3 JSON gateway");
      }
      const int code = static_cast<int>(error.contains("code") ? Int(error, "code") : Int(error, "grpc_code"));
      const std::string msg = Str(error, "message");
      LOG_DEBUG("store: {}: {}: {} (gRPC code {})", url_, what, msg, code);
      return FromGrpcCode(code, url_ + ": " + what + ": " + msg + " (gRPC code " + std::to_string(code) + ")");
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
  const std::string url_;
  std::mutex mu_;
  std::vector<std::unique_ptr<httplib::Client>> idle_;  // GUARDED_BY(mu_)
};

}  // namespace

Result<std::shared_ptr<Store>> MakeEtcdStore(const std::string& host, int port, const StoreOptions& opt) {
  const std::string url = "etcd://" + host + ":" + std::to_string(port);
  if (host.empty()) return Status::InvalidArgument(url + ": empty host: expected etcd://HOST:PORT");
  if (port < 1 || port > 65535)
    return Status::InvalidArgument(url + ": port " + std::to_string(port) + ": expected 1..65535");
  if (opt.request_timeout <= milliseconds(0) || opt.poll_interval <= milliseconds(0)) {
    return Status::InvalidArgument(url + ": request_timeout=" + std::to_string(opt.request_timeout.count()) +
                                   " ms, poll_interval=" + std::to_string(opt.poll_interval.count()) +
                                   " ms: expected both > 0");
  }
  return std::shared_ptr<Store>(std::make_shared<EtcdStore>(host, port, opt));
}

}  // namespace elastrain
