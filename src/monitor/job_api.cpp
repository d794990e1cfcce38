#include "monitor/job_api.h"

#include <fcntl.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/safe_path.h"
#include "common/http_status.h"
#include "common/json.h"
#include "common/log.h"
#include "config/config.h"
#include "jobctl/cluster_view.h"
#include "jobctl/job_control.h"
#include "jobctl/run_token.h"
#include "monitor/api_requests.h"
#include "monitor/dashboard.h"
#include "monitor/http_gate.h"
#include "monitor/prometheus.h"
#include "monitor/request_guard.h"
#include "monitor/run_view.h"
#include "wire/events.h"
#include "wire/job_status.h"
#include "wire/protocol.h"

namespace elastrain {

nlohmann::json ConfigStatusFields(const TrainConfig& cfg) {
  return {{"steps", cfg.steps},
          {"num_workers", cfg.num_workers_spec},
          {"max_failures", cfg.max_failures},
          {"checkpoint_period", cfg.checkpoint_period},
          {"cost_per_worker_hour", cfg.cost_per_worker_hour},
          {"model_name", cfg.model.name}};
}

namespace {

// The hosts with a health record or an exclusion. A record that does not load is shown
// as such (its reason the parse error), never trusted and never fatal.
Result<std::vector<JobStatusHost>> HostsStatus(Store& store, const JobRecord& rec, double now) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, store.List(keys::HealthPrefix()));
  std::map<std::string, JobStatusHost> hosts;
  for (const KeyValue& kv : kvs) {
    const std::string host = kv.key.substr(keys::HealthPrefix().size());
    JobStatusHost& h = hosts[host];
    h.host = host;
    HealthRecord r;
    if (Status st = FromJson(kv.value, &r); !st.ok()) {
      h.health = "unreadable";
      h.reason = st.message().substr(0, 300);
      continue;
    }
    h.health = r.expires_at <= now ? "expired" : r.healthy ? "healthy" : "unhealthy";
    h.check = r.check;
    h.reason = r.reason.substr(0, 300);
    h.checked_at = r.checked_at;
    h.expires_at = r.expires_at;
  }
  for (const auto& [host, at] : rec.excluded_at) {
    JobStatusHost& h = hosts[host];
    h.host = host;
    if (auto c = rec.cooldown_until.find(host); c != rec.cooldown_until.end()) h.excluded_until = c->second;
  }
  std::vector<JobStatusHost> out;
  for (auto& [host, h] : hosts) out.push_back(std::move(h));
  return out;
}

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string JoinStrings(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// A gray-failure event in one line; nullopt for any other event.
std::optional<JobStatusEvent> GrayEvent(const EventRecord& r) {
  JobStatusEvent e{r.time, std::string(EventName(r.event)), ""};
  if (const auto* d = EventAs<StragglerDetectedEvent>(r))
    e.detail = fmt::format("rank {} on {}: {:.2f}x the median compute ({:.3f} s vs {:.3f} s a step) since step {}; "
                           "policy {}",
                           d->rank, d->host, d->slowdown, d->compute_seconds, d->median_compute_seconds, d->since_step,
                           d->policy);
  else if (const auto* c = EventAs<StragglerClearedEvent>(r))
    e.detail = fmt::format("rank {} on {}: {} ({:.2f}x at step {})", c->rank, c->host, c->reason, c->slowdown, c->step);
  else if (const auto* x = EventAs<HostExcludedEvent>(r))
    e.detail = fmt::format("host {}: {}; expected gain {:.1f} s against a re-plan of {:.1f} s", x->host, x->reason,
                           x->expected_gain_seconds, x->replan_cost_seconds);
  else if (const auto* h = EventAs<HostHealthEvent>(r))
    e.detail = fmt::format("host {}: {} ({}){}", h->host, h->healthy ? "healthy" : "UNHEALTHY", h->check,
                           h->reason.empty() ? "" : ": " + h->reason);
  else if (const auto* g = EventAs<HangDiagnosedEvent>(r))
    e.detail = fmt::format("generation {} ({}): rank(s) {} behind on {}{}", g->generation, g->trigger,
                           JoinInts(g->behind), JoinStrings(g->hosts), g->reason.empty() ? "" : ": " + g->reason);
  else return std::nullopt;
  return e;
}

}  // namespace

std::vector<JobStatusEvent> GrayEvents(const std::string& run_dir, size_t max_events) {
  std::deque<JobStatusEvent> last;
  auto fd = OpenFile(run_dir + "/events.jsonl", O_RDONLY);
  if (!fd.ok()) return {};
  FILE* in = ::fdopen(fd->release(), "r");
  if (in == nullptr) return {};
  char* buf = nullptr;
  size_t cap = 0;
  for (ssize_t n; (n = ::getline(&buf, &cap, in)) > 0;) {
    const std::string_view line(buf, static_cast<size_t>(n));
    // Most lines are none of these: skip them unparsed.
    if (line.find("straggler_") == std::string_view::npos && line.find("host_excluded") == std::string_view::npos &&
        line.find("host_health") == std::string_view::npos && line.find("hang_diagnosed") == std::string_view::npos)
      continue;
    auto r = DecodeEventLine(line);
    if (!r.ok()) continue;  // a torn or foreign line
    if (auto e = GrayEvent(r.value())) last.push_back(std::move(*e));
    if (last.size() > max_events) last.pop_front();
  }
  std::free(buf);
  std::fclose(in);
  return {last.begin(), last.end()};
}

Result<nlohmann::json> JobStatusJson(Store& store) {
  ELASTRAIN_ASSIGN_OR_RETURN(JobView v, ReadJobView(store));
  JobStatus s;  // wire/job_status.h: the CLI reads the same record
  s.job = v.spec.job_id;
  s.run_dir = v.spec.run_dir;
  if (auto cfg = LoadConfigText(v.spec.config_yaml, "job config"); cfg.ok()) {
    s.steps = cfg->steps;
    s.num_workers = cfg->num_workers_spec;
    s.max_failures = cfg->max_failures;
    s.checkpoint_period = cfg->checkpoint_period;
    s.cost_per_worker_hour = cfg->cost_per_worker_hour;
    s.model_name = cfg->model.name;
    s.launched = !cfg->launch_program.empty();
  }
  const JobRecord rec = v.cluster.record.value_or(JobRecord());
  s.state = rec.state;
  s.reason = rec.reason;
  s.generation = rec.generation;
  s.world = rec.world;
  s.step = rec.step;
  s.failures = rec.failures;
  s.restarts = rec.restarts;
  s.latest_checkpoint_step = rec.latest_checkpoint_step;
  s.started_at = rec.started_at;
  s.ended_at = rec.ended_at;
  for (const AgentInfo& a : v.cluster.agents) {
    auto why = rec.host_unplanned.find(a.host);
    s.agents.push_back({a.id, a.host, a.slots, a.preempting, why == rec.host_unplanned.end() ? "" : why->second});
  }
  const auto workers = v.cluster.Workers();
  if (v.cluster.plan) {
    for (const PlanMember& m : v.cluster.plan->members) {
      JobStatusRank r;
      r.rank = m.rank;
      r.host = m.host;
      r.agent = m.agent;
      r.worker = m.worker;
      r.pid = m.pid;
      for (const auto& [agent, w] : workers)
        if (w.id == m.worker) {
          r.step = w.step;
          r.phase = w.phase == WorkerPhase::kRunning ? Name(w.train_phase) : Name(w.phase);
          if (w.generation == v.cluster.plan->generation) {  // figures of an older generation are not this rank's
            r.compute_seconds = w.compute_seconds;
            r.wait_seconds = w.wait_seconds;
            r.timed_steps = w.timed_steps;
            r.collective_seq = w.collective_seq;
            r.collective_kind = w.collective_kind;
            r.in_collective = w.in_collective;
          }
        }
      if (auto t = rec.stragglers.find(m.worker);
          t != rec.stragglers.end() && t->second.generation == v.cluster.plan->generation) {
        r.straggler = t->second.detected;
        r.slowdown = t->second.slowdown;
      }
      s.ranks.push_back(std::move(r));
    }
  }
  for (const auto& [agent, w] : workers) s.idle_workers += w.phase == WorkerPhase::kIdle ? 1 : 0;
  s.time = WallSeconds();
  ELASTRAIN_ASSIGN_OR_RETURN(s.hosts, HostsStatus(store, rec, s.time));
  s.gray_events = GrayEvents(v.spec.run_dir, kMaxStatusGrayEvents);
  // A head record that does not parse shows no leader (it is a status, not a decision).
  if (auto head = ReadRecord<HeadRecord>(store, keys::Head()); head.ok() && head->has_value()) {
    s.leader = (*head)->id;
    s.leader_url = (*head)->url;
  }
  return ToJsonValue(s);
}

Result<nlohmann::json> JobEventsJson(Store& store, size_t max_events) {
  ELASTRAIN_ASSIGN_OR_RETURN(JobView v, ReadJobView(store));
  std::deque<nlohmann::json> last;
  // Not through a link (common/safe_path.h): the run directory is the job's, not ours.
  auto fd = OpenFile(v.spec.run_dir + "/events.jsonl", O_RDONLY);
  if (!fd.ok()) {
    if (fd.status().code() == StatusCode::kNotFound) return nlohmann::json::array();
    return fd.status();
  }
  FILE* in = ::fdopen(fd->release(), "r");
  if (in == nullptr) return Status::IOError(v.spec.run_dir + "/events.jsonl: fdopen failed");
  char* buf = nullptr;
  size_t cap = 0;
  for (ssize_t n; (n = ::getline(&buf, &cap, in)) > 0;) {
    auto e = nlohmann::json::parse(buf, buf + n, nullptr, false);
    if (!e.is_object()) continue;  // a torn or foreign line
    last.push_back(std::move(e));
    if (last.size() > max_events) last.pop_front();
  }
  std::free(buf);
  std::fclose(in);
  return nlohmann::json(std::vector<nlohmann::json>(last.begin(), last.end()));
}

namespace {

// Who may call a route.
enum class Access {
  kPublic,   // GET /: the page holds no data; it gets the token from its URL's fragment
  kMetrics,  // GET /metrics: public only with metrics_without_token
  kToken,    // everything else
};

void SetError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  // replace: a message quoting client bytes that are not UTF-8 must not throw.
  res.set_content(nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

// Refused requests go to the log (peer, method, path, code; never a header or the body),
// at most kMaxRefusalLines per kRefusalWindowSeconds so that a flood cannot fill the disk.
// Every byte from the request is escaped (EscapeForLog: no terminal escape sequences in
// the log); the peer comes from the gate when httplib did not parse the request (400).
class RefusalLog {
 public:
  void Note(const httplib::Request& req, int status) {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = WallSeconds();
    if (now - window_start_ >= kRefusalWindowSeconds) {
      if (suppressed_ > 0) LOG_WARN("api: {} more refused requests were not logged", suppressed_);
      window_start_ = now;
      lines_ = 0;
      suppressed_ = 0;
    }
    if (lines_ >= kMaxRefusalLines) {
      ++suppressed_;
      return;
    }
    ++lines_;
    const GateRequest* raw = CurrentGateRequest();
    std::string peer = req.remote_addr;
    if (peer.empty() && raw) peer = raw->peer;
    if (peer.empty()) peer = "an unknown peer";
    if ((req.method.empty() || req.path.empty()) && raw) {  // the request line or a header did not parse
      LOG_WARN("api: refused '{}' from {}: HTTP {}", EscapeForLog(raw->first_line, 160), peer, status);
      return;
    }
    LOG_WARN("api: refused {} {} from {}: HTTP {}", EscapeForLog(req.method, 10), EscapeForLog(req.path, 120), peer,
             status);
  }

 private:
  static constexpr double kRefusalWindowSeconds = 10;
  static constexpr int kMaxRefusalLines = 20;
  std::mutex mu_;
  double window_start_ = 0;  // GUARDED_BY(mu_)
  int lines_ = 0;            // GUARDED_BY(mu_)
  int64_t suppressed_ = 0;   // GUARDED_BY(mu_)
};

// The names and addresses of this machine, for the Host check of a wildcard bind.
std::vector<std::string> LocalNames() {
  std::vector<std::string> names = {"localhost"};
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0]) names.push_back(host);
  ifaddrs* addrs = nullptr;
  if (getifaddrs(&addrs) != 0) return names;
  for (ifaddrs* a = addrs; a; a = a->ifa_next) {
    if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* src = a->ifa_addr->sa_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr);
    if (inet_ntop(a->ifa_addr->sa_family, src, text, sizeof(text))) names.push_back(text);
  }
  freeifaddrs(addrs);
  return names;
}

// The request's Content-Length: 0 without one, nullopt when it is not a number.
std::optional<uint64_t> DeclaredBodyBytes(const httplib::Request& req) {
  if (!req.has_header("Content-Length")) return 0;
  const std::string text = req.get_header_value("Content-Length");
  uint64_t length = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return length;
}

bool ExpectsBody(const std::string& method) {  // as httplib's detail::expect_content
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" || method == "PRI";
}

// httplib's server, answering the requests the gate hands over (process_request is
// protected: the gate, not httplib's accept loop, owns the connections).
class GatedHttpServer : public httplib::Server {
 public:
  using httplib::Server::process_request;
};

}  // namespace

class JobApiServer::Impl {
 public:
  Impl(std::shared_ptr<Store> store, JobApiOptions options) : store_(std::move(store)), opt_(std::move(options)) {}
  ~Impl() { Stop(); }
  Result<std::string> Start(const std::string& host, int port);
  void Stop() {
    if (gate_) gate_->Stop();
  }

 private:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  static void Reply(httplib::Response& res, const Status& st, const nlohmann::json& ok_body) {
    if (st.ok()) {
      res.set_content(ok_body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
      return;
    }
    SetError(res, HttpStatusFor(st), st.message());
  }
  void Routes();
  void Route(const std::string& method, const std::string& path, Access access, Handler fn);
  // The current job's status and run files; an empty status when no job was submitted.
  nlohmann::json Current(RunSnapshot* run);
  // The checks every request passes before its handler runs (Host, token, content
  // type); false after answering the refusal.
  bool Admit(const httplib::Request& req, httplib::Response& res, Access access);
  // The checks of a request's framing that must come before its body is read: no
  // chunked body, a Content-Length within the limit. False after answering.
  bool FramingOk(const httplib::Request& req, httplib::Response& res);
  // httplib's hook before it reads a body: framing, and a body-less POST dispatched as
  // an empty one (httplib 0.11.4 would read such a body until the connection closes).
  httplib::Server::HandlerResponse PreRouting(const httplib::Request& req, httplib::Response& res);

  std::shared_ptr<Store> store_;
  const JobApiOptions opt_;
  RunView view_;
  std::unique_ptr<GatedHttpServer> server_;
  std::unique_ptr<HttpGate> gate_;  // owns the socket and the connections; answers through server_
  RefusalLog refusals_;
  std::map<std::string, Handler> posts_;  // path -> the guarded handler, for PreRouting
  std::vector<std::string> allowed_hosts_;
};

nlohmann::json JobApiServer::Impl::Current(RunSnapshot* run) {
  auto j = JobStatusJson(*store_);
  if (!j.ok()) return nlohmann::json::object();
  view_.SetRunDir(j->value("run_dir", ""));
  if (run) *run = view_.Snapshot(WallSeconds());
  return j.value();
}

bool JobApiServer::Impl::Admit(const httplib::Request& req, httplib::Response& res, Access access) {
  const std::string host = req.get_header_value("Host");
  if (!HostHeaderAllowed(host, allowed_hosts_)) {
    std::string names;
    for (const std::string& a : allowed_hosts_) names += (names.empty() ? "" : ", ") + a;
    SetError(res, host.empty() ? kHttpForbidden : kHttpMisdirected,
             fmt::format("Host header '{}' is not a name of this server; expected one of: {} (add a name with "
                         "`elastrain head --allowed-host NAME` or the config key dashboard_allowed_hosts)",
                         host.substr(0, 100), names));
    return false;
  }
  const bool open = access == Access::kPublic || (access == Access::kMetrics && opt_.metrics_without_token);
  if (!open) {
    const std::string auth = req.get_header_value("Authorization");
    if (!BearerMatches(auth, opt_.token)) {
      res.set_header("WWW-Authenticate", "Bearer realm=\"elastrain\"");
      SetError(res, kHttpUnauthorized,
               fmt::format("unauthorized ({}): expected the header Authorization: Bearer <the token in {}>{}",
                           auth.empty() ? "no Authorization header" : "the bearer token does not match",
                           opt_.token_file,
                           access == Access::kMetrics ? " (or start the server with metrics_without_token to open "
                                                        "/metrics to scrapers)"
                                                      : ""));
      return false;
    }
  }
  if (req.method == "POST") {
    const std::string type = req.get_header_value("Content-Type");
    const bool empty = (!req.has_header("Content-Length") || req.get_header_value("Content-Length") == "0") &&
                       !req.has_header("Transfer-Encoding");
    if (!(type.empty() && empty) && !IsJsonContentType(type)) {
      SetError(res, kHttpUnsupportedMediaType,
               fmt::format("Content-Type '{}': expected application/json", type.substr(0, 100)));
      return false;
    }
  }
  return true;
}

bool JobApiServer::Impl::FramingOk(const httplib::Request& req, httplib::Response& res) {
  if (req.has_header("Transfer-Encoding")) {
    SetError(res, kHttpLengthRequired,
             fmt::format("Transfer-Encoding '{}': expected a body sent with Content-Length (at most {} bytes)",
                         req.get_header_value("Transfer-Encoding").substr(0, 100), opt_.max_body_bytes));
    return false;
  }
  if (!req.has_header("Content-Length")) return true;
  const std::optional<uint64_t> declared = DeclaredBodyBytes(req);
  if (!declared) {
    SetError(res, kHttpBadRequest,
             fmt::format("Content-Length '{}': expected a number of bytes",
                         req.get_header_value("Content-Length").substr(0, 100)));
    return false;
  }
  const uint64_t length = *declared;
  if (length > opt_.max_body_bytes) {
    SetError(res, kHttpPayloadTooLarge,
             fmt::format("request body of {} bytes: the limit is {} bytes", length, opt_.max_body_bytes));
    return false;
  }
  return true;
}

httplib::Server::HandlerResponse JobApiServer::Impl::PreRouting(const httplib::Request& req, httplib::Response& res) {
  using HR = httplib::Server::HandlerResponse;
  if (!ExpectsBody(req.method)) return HR::Unhandled;
  if (!FramingOk(req, res)) {
    // A body too large but within kMaxDrainedBodyBytes: httplib's payload limit (set to
    // max_body_bytes) reads and discards it, then sends the 413 already in `res`.
    // Refused unread, 2 clients in 100 saw a reset instead of the 413 (curl exit 55).
    const uint64_t drained_at_most = std::max<uint64_t>(kMaxDrainedBodyBytes, opt_.max_body_bytes);
    const bool drain =
        res.status == kHttpPayloadTooLarge && DeclaredBodyBytes(req).value_or(UINT64_MAX) <= drained_at_most;
    return drain ? HR::Unhandled : HR::Handled;
  }
  if (req.has_header("Content-Length")) return HR::Unhandled;  // httplib reads it, within the limit
  // No Content-Length and no Transfer-Encoding: the body is empty (RFC 9112 6.3).
  const auto route = req.method == "POST" ? posts_.find(req.path) : posts_.end();
  if (route == posts_.end()) {
    SetError(res, kHttpNotFound, fmt::format("no route {} {}", req.method, req.path.substr(0, 100)));
    return HR::Handled;
  }
  route->second(req, res);
  return HR::Handled;
}

void JobApiServer::Impl::Route(const std::string& method, const std::string& path, Access access, Handler fn) {
  Handler guarded = [this, access, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    if (Admit(req, res, access)) fn(req, res);
  };
  // httplib's patterns are regular expressions; ours are plain paths.
  if (method == "GET") {
    server_->Get(path, guarded);
  } else {
    server_->Post(path, guarded);
    posts_[path] = guarded;
  }
}

void JobApiServer::Impl::Routes() {
  Route("GET", "/", Access::kPublic, [](const httplib::Request&, httplib::Response& res) {
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-store");
    res.set_content(DashboardHtml(), "text/html; charset=utf-8");
  });
  Route("GET", "/metrics", Access::kMetrics, [this](const httplib::Request&, httplib::Response& res) {
    RunSnapshot run;
    const nlohmann::json st = Current(&run);
    res.set_content(RenderPrometheus(st, run), "text/plain; version=0.0.4; charset=utf-8");
  });
  Route("GET", "/api/v1/checkpoints", Access::kToken, [this](const httplib::Request&, httplib::Response& res) {
    const nlohmann::json st = Current(nullptr);
    if (!st.contains("job")) return Reply(res, Status::NotFound("no job has been submitted"), {});
    Reply(res, Status::OK(), CheckpointsJson(st.value("run_dir", "")));
  });
  Route("GET", "/api/v1/goodput", Access::kToken, [this](const httplib::Request&, httplib::Response& res) {
    RunSnapshot run;
    const nlohmann::json st = Current(&run);
    if (!st.contains("job")) return Reply(res, Status::NotFound("no job has been submitted"), {});
    Reply(res, Status::OK(), run.goodput.ToJson());
  });
  Route("GET", "/api/v1/dashboard", Access::kToken, [this](const httplib::Request&, httplib::Response& res) {
    RunSnapshot run;
    const nlohmann::json st = Current(&run);
    Reply(res, Status::OK(),
          DashboardJson(st, run, st.contains("job") ? CheckpointsJson(st.value("run_dir", "")) : nlohmann::json::array()));
  });
  Route("GET", "/api/v1/job", Access::kToken, [this](const httplib::Request&, httplib::Response& res) {
    auto j = JobStatusJson(*store_);
    Reply(res, j.status(), j.ok() ? j.value() : nlohmann::json());
  });
  Route("GET", "/api/v1/events", Access::kToken, [this](const httplib::Request&, httplib::Response& res) {
    auto j = JobEventsJson(*store_);
    Reply(res, j.status(), j.ok() ? j.value() : nlohmann::json());
  });
  Route("POST", "/api/v1/stop", Access::kToken, [this](const httplib::Request& req, httplib::Response& res) {
    // No fields: an empty body (curl -X POST) or {}.
    if (req.body.find_first_not_of(" \t\r\n") != std::string::npos) {
      auto body = ParseJson(req.body, "stop", kMaxRequestJsonDepth);
      if (!body.ok() || !body->is_object() || !body->empty())
        return Reply(res, Status::InvalidArgument("stop: expected no body or {}"), {});
    }
    Reply(res, RequestJobStop(*store_), {{"stop", "requested"}});
  });
  Route("POST", "/api/v1/chaos", Access::kToken, [this](const httplib::Request& req, httplib::Response& res) {
    auto r = ParseChaosRequest(req.body);
    if (!r.ok()) return Reply(res, r.status(), {});
    Reply(res, RequestChaos(*store_, r->action, r->rank, r->host, !opt_.embedded, r->factor, r->seconds), {{"chaos", "requested"}});
  });
  Route("POST", "/api/v1/jobs", Access::kToken, [this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.embedded)
      return Reply(res, Status::FailedPrecondition("this is an embedded `elastrain train`; submit to an `elastrain head`"),
                   {});
    auto r = ParseSubmitRequest(req.body);
    if (!r.ok()) return Reply(res, r.status(), {});
    auto cfg = LoadConfigText(r->config_yaml, "submitted config");
    if (!cfg.ok()) return Reply(res, Status::InvalidArgument(cfg.status().message()), {});
    auto spec = SubmitJob(*store_, cfg.value());
    Reply(res, spec.status(), spec.ok() ? ToJsonValue(SubmittedJob{spec->job_id, spec->run_dir}) : nlohmann::json());
  });
}

Result<std::string> JobApiServer::Impl::Start(const std::string& host, int port) {
  if (opt_.token.empty()) return Status::InvalidArgument("the job API needs a bearer token (none was given)");
  const bool tls = !opt_.tls_cert.empty() || !opt_.tls_key.empty();
  if (!server_) {
    if (tls) {
      if (opt_.tls_cert.empty() || opt_.tls_key.empty())
        return Status::InvalidArgument(fmt::format("TLS needs both a certificate and a key (got certificate '{}', key "
                                                   "'{}')",
                                                   opt_.tls_cert, opt_.tls_key));
      for (const std::string* f : {&opt_.tls_cert, &opt_.tls_key})
        if (access(f->c_str(), R_OK) != 0)
          return Status::NotFound(fmt::format("TLS file {}: {}", *f, std::strerror(errno)));
    }
    auto server = std::make_unique<GatedHttpServer>();
    GateLimits limits;
    limits.max_buffered_body = opt_.max_body_bytes;
    limits.max_drained_body = std::max<size_t>(kMaxDrainedBodyBytes, opt_.max_body_bytes);  // as PreRouting
    auto gate = std::make_unique<HttpGate>(limits, [this](httplib::Stream& strm) {
      bool closed = true;
      server_->process_request(strm, /*close_connection=*/true, closed, {});
    });
    if (tls) ELASTRAIN_RETURN_IF_ERROR(gate->SetTls(opt_.tls_cert, opt_.tls_key));
    server_ = std::move(server);
    gate_ = std::move(gate);
    Routes();
    server_->set_payload_max_length(opt_.max_body_bytes);
    // One request per connection (the gate closes it after the answer): a refused
    // request's unread body is never parsed as the next request, and nothing waits on an
    // idle keep-alive (the API is polled every 2 s at most).
    server_->set_keep_alive_max_count(1);
    server_->set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return PreRouting(req, res); });
    // "Expect: 100-continue" (curl sends it for bodies over 1 MiB): refuse before the
    // client sends the body.
    server_->set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!FramingOk(req, res) || !Admit(req, res, Access::kToken)) return res.status;
      return kHttpContinue;
    });
    server_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      if (res.status == kHttpBadRequest || res.status == kHttpUnauthorized || res.status == kHttpForbidden ||
          res.status == kHttpLengthRequired || res.status == kHttpPayloadTooLarge ||
          res.status == kHttpUnsupportedMediaType || res.status == kHttpMisdirected || res.status == 414)
        refusals_.Note(req, res.status);
    });
    server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      SetError(res, kHttpInternalError, what);
    });
  }
  auto bound = gate_->Listen(host, port);
  if (!bound.ok()) return bound.status();
  std::vector<std::string> names = opt_.allowed_hosts;
  if (IsWildcardHost(host)) {
    const std::vector<std::string> local = LocalNames();
    names.insert(names.end(), local.begin(), local.end());
  }
  allowed_hosts_ = AllowedHostHeaders(host, *bound, tls ? 443 : 80, names);
  gate_->Serve();
  const GateLimits limits = gate_->limits();
  LOG_INFO("api: at most {} connections ({} per address), {:.0f} s to send a request, {} worker threads",
           limits.max_connections, limits.max_per_peer, limits.request_seconds, limits.workers);
  const std::string url_host = host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
  return fmt::format("{}://{}:{}", tls ? "https" : "http", url_host, *bound);
}

JobApiServer::JobApiServer(std::shared_ptr<Store> store, JobApiOptions options)
    : impl_(std::make_unique<Impl>(std::move(store), std::move(options))) {}
JobApiServer::~JobApiServer() = default;
Result<std::string> JobApiServer::Start(const std::string& host, int port) { return impl_->Start(host, port); }
void JobApiServer::Stop() { impl_->Stop(); }

}  // namespace elastrain
