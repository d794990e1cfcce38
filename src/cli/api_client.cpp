#include "cli/api_client.h"

#include <httplib.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "common/http_status.h"
#include "common/json.h"
#include "jobctl/run_token.h"

namespace elastrain {

namespace {

constexpr int kHttpTimeoutSeconds = 10;
// With several --head URLs, a head that does not accept the connection within this is
// passed over (a cut-off host never answers the SYN).
constexpr int kHeadListConnectTimeoutSeconds = 3;

// At most `max` bytes of an answer as a message quotes it, unprintable bytes as '?'.
std::string Printable(std::string_view body, size_t max = 80) {
  std::string shown;
  for (char c : body.substr(0, max)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return body.size() > max ? shown + "..." : shown;
}

// The hint of every unreadable answer.
std::string ExpectedAnswer(const std::string& url) {
  return fmt::format("is {} an `elastrain head` or `elastrain train` of this version? --head URL, --run-dir DIR", url);
}

}  // namespace

std::string NormalizeUrl(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  const size_t scheme_end = url.find("://");
  const size_t host_end = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  std::transform(url.begin(), host_end == std::string::npos ? url.end() : url.begin() + host_end, url.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return url;
}

std::string CaCertFrom(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("ELASTRAIN_CA_CERT");
  return env ? env : "";
}

Result<ApiTarget> ResolveApiTarget(const ApiTargetArgs& a) {
  ApiTarget t;
  if (!a.run_dir.empty()) {
    if (!a.token_file.empty())
      return Status::InvalidArgument(fmt::format("--token-file goes with --head; the token of the run at --run-dir {} "
                                                 "is {}/{}",
                                                 a.run_dir, a.run_dir, kTokenFileName));
    const std::string url_file = a.run_dir + "/" + kHeadUrlFileName;
    auto url = ReadUrlFile(url_file);
    if (!url.ok())
      return Status::NotFound(fmt::format("--run-dir {}: no head_url there (is the job running? expected {})", a.run_dir,
                                          url_file));
    if (!a.head.empty() && NormalizeUrl(a.head) != NormalizeUrl(url.value()))
      return Status::InvalidArgument(fmt::format("--head {} is not the API the run at {} recorded ({} in {}); the run's "
                                                 "token goes only there: drop --head",
                                                 a.head, a.run_dir, url.value(), url_file));
    ELASTRAIN_ASSIGN_OR_RETURN(t.token, ReadRunToken(a.run_dir));
    t.url = url.value();
    t.token_source = a.run_dir + "/" + kTokenFileName;
    return t;
  }
  const std::string default_url_file = UrlFileBeside(a.default_token_file);
  if (a.head.empty()) {
    if (!a.token_file.empty())
      return Status::InvalidArgument(fmt::format("--token-file {}: a token you give is sent only to a --head URL you "
                                                 "name: add --head",
                                                 a.token_file));
    auto url = ReadUrlFile(default_url_file);
    if (!url.ok())
      return Status::NotFound(fmt::format("no --head and no head recorded at {} (started by `elastrain head`); pass "
                                          "--head URL with --token-file PATH or ELASTRAIN_TOKEN, or --run-dir DIR",
                                          default_url_file));
    ELASTRAIN_ASSIGN_OR_RETURN(t.token, ReadTokenFile(a.default_token_file));
    t.url = url.value();
    t.token_source = a.default_token_file;
    return t;
  }
  t.url = a.head;
  if (!a.token_file.empty()) {
    ELASTRAIN_ASSIGN_OR_RETURN(t.token, ReadTokenFile(a.token_file));
    t.token_source = a.token_file;
    return t;
  }
  if (!a.env_token.empty()) {
    t.token = a.env_token;
    t.token_source = "ELASTRAIN_TOKEN";
    return t;
  }
  auto recorded = ReadUrlFile(default_url_file);
  if (recorded.ok() && NormalizeUrl(recorded.value()) == NormalizeUrl(a.head) && HeadUrls(a.head).size() == 1) {
    ELASTRAIN_ASSIGN_OR_RETURN(t.token, ReadTokenFile(a.default_token_file));
    t.token_source = a.default_token_file;
    return t;
  }
  return Status::InvalidArgument(fmt::format(
      "no token for --head {}: pass --token-file PATH or set ELASTRAIN_TOKEN ({}; the default token {} is sent only "
      "to the head recorded beside it)",
      a.head,
      recorded.ok() ? fmt::format("{} records {}", default_url_file, recorded.value())
                    : fmt::format("no head recorded at {}", default_url_file),
      a.default_token_file));
}

std::vector<std::string> HeadUrls(const std::string& head) {
  std::vector<std::string> urls;
  size_t from = 0;
  while (from <= head.size()) {
    const size_t comma = std::min(head.find(',', from), head.size());
    std::string u = head.substr(from, comma - from);
    u.erase(0, u.find_first_not_of(" \t"));
    u.erase(u.find_last_not_of(" \t") + 1);
    if (!u.empty()) urls.push_back(std::move(u));
    from = comma + 1;
  }
  return urls;
}

namespace {
// One request to one head (target.url is one URL); connect_timeout in seconds.
Result<nlohmann::json> CallOneHead(const ApiTarget& target, const std::string& ca_cert, const std::string& method,
                                   const std::string& path, const nlohmann::json& body, int connect_timeout) {
  const std::string& url = target.url;
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return Status::InvalidArgument(fmt::format("API URL '{}': expected http://HOST:PORT or https://HOST:PORT", url));
  httplib::Client cli(url);
  cli.set_connection_timeout(connect_timeout);
  cli.set_read_timeout(kHttpTimeoutSeconds);
  cli.enable_server_certificate_verification(true);
  if (!ca_cert.empty()) cli.set_ca_cert_path(ca_cert);
  cli.set_bearer_token_auth(target.token);
  // replace: a config with bytes that are not UTF-8 must not throw here (dump would).
  const std::string sent = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto res = method == "GET" ? cli.Get(path) : cli.Post(path, sent, "application/json");
  if (!res) {
    const httplib::Error err = res.error();
    if (err == httplib::Error::SSLServerVerification)
      return Status::Unavailable(fmt::format(
          "the TLS certificate of {} did not verify ({}) against {}; pass --ca-cert PATH or set ELASTRAIN_CA_CERT to "
          "the CA that signed it",
          url, X509_verify_cert_error_string(cli.get_openssl_verify_result()),
          ca_cert.empty() ? "the system's CAs" : ca_cert));
    if (err == httplib::Error::SSLLoadingCerts)
      return Status::InvalidArgument(fmt::format("cannot load the CA certificate '{}' (--ca-cert or ELASTRAIN_CA_CERT; "
                                                 "expected a PEM file)",
                                                 ca_cert));
    return Status::Unavailable(fmt::format("cannot reach the head at {} ({}); is `elastrain head` or "
                                           "`elastrain train` running? (--head URL, --run-dir DIR)",
                                           url, httplib::to_string(err)));
  }
  return DecodeApiAnswer(target, method, path, res->status, res->body);
}
}  // namespace

Result<nlohmann::json> CallApi(const ApiTarget& target, const std::string& ca_cert, const std::string& method,
                               const std::string& path, const nlohmann::json& body) {
  const std::vector<std::string> urls = HeadUrls(target.url);
  if (urls.size() <= 1) return CallOneHead(target, ca_cert, method, path, body, kHttpTimeoutSeconds);
  // Several heads (any of them answers from the store; docs/cluster.md "Several heads"):
  // each in turn, until one answers. One that cannot be reached, or that cannot reach the
  // store (Unavailable), passes the request to the next.
  std::string tried;
  for (const std::string& url : urls) {
    ApiTarget one = target;
    one.url = url;
    auto r = CallOneHead(one, ca_cert, method, path, body, kHeadListConnectTimeoutSeconds);
    if (r.ok() || r.status().code() != StatusCode::kUnavailable) return r;
    tried += (tried.empty() ? "" : "; ") + r.status().message();
  }
  return Status::Unavailable(fmt::format("no head of {} answered: {}", target.url, tried));
}

Result<nlohmann::json> DecodeApiAnswer(const ApiTarget& target, const std::string& method, const std::string& path,
                                       int http_status, std::string_view body) {
  const std::string& url = target.url;
  const std::string answered = fmt::format("the head at {} answered {} {}", url, method, path);
  if (http_status != kHttpOk) {
    auto j = ParseJson(body, answered);
    std::string msg = j.ok() ? LenientString(j.value(), "error") : "";
    const bool foreign = msg.empty();  // not an elastrain error: a proxy's page, another server
    if (foreign)
      msg = fmt::format("{} with HTTP {} and no elastrain error, starting '{}'", answered, http_status, Printable(body));
    if (http_status == kHttpUnauthorized) msg += fmt::format(" (the token sent is from {})", target.token_source);
    const Status st = StatusFromHttp(http_status, msg);
    if (st.code() != StatusCode::kInternal) return st;
    if (foreign) return Status::Internal(msg);
    return Status::Internal(fmt::format("{} {}{}: {}", method, url, path, st.message()));  // "HTTP 500: ..."
  }
  auto j = ParseJson(body, answered);
  if (!j.ok()) return Status::Corruption(fmt::format("{}; expected JSON ({})", j.status().message(), ExpectedAnswer(url)));
  return j;
}

Result<JobStatus> DecodeJobStatus(const ApiTarget& target, const nlohmann::json& answer) {
  auto s = JobStatusFromJson(answer, fmt::format("the head at {} answered GET /api/v1/job", target.url));
  if (!s.ok()) return Status::Corruption(fmt::format("{}; expected a job status ({})", s.status().message(),
                                                     ExpectedAnswer(target.url)));
  return s;
}

Result<SubmittedJob> DecodeSubmittedJob(const ApiTarget& target, const nlohmann::json& answer) {
  auto s = SubmittedJobFromJson(answer, fmt::format("the head at {} answered POST /api/v1/jobs", target.url));
  if (!s.ok()) return Status::Corruption(fmt::format("{}; expected {{\"job_id\", \"run_dir\"}} ({})",
                                                     s.status().message(), ExpectedAnswer(target.url)));
  return s;
}

Result<JobStatus> GetJobStatus(const ApiTarget& target, const std::string& ca_cert) {
  ELASTRAIN_ASSIGN_OR_RETURN(nlohmann::json j, CallApi(target, ca_cert, "GET", "/api/v1/job"));
  return DecodeJobStatus(target, j);
}

}  // namespace elastrain
