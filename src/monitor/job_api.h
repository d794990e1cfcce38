// The controller's HTTP API (cpp-httplib behind an accept gate, monitor/http_gate.h: a
// 10 s deadline per request, caps per server and per address), served by `elastrain
// head` and by the embedded `elastrain train` (dashboard_host:dashboard_port, Ray's 8265
// by default), over HTTP or, with a certificate and key, HTTPS:
//   GET  /                 the live dashboard page (monitor/dashboard.h); holds no data
//   GET  /metrics          Prometheus text format (monitor/prometheus.h)
//   GET  /api/v1/job       the job's status (JobStatusJson)
//   GET  /api/v1/events    the run's events.jsonl as a JSON array (the last 1000)
//   GET  /api/v1/checkpoints, /api/v1/goodput, /api/v1/dashboard (JSON)
//   POST /api/v1/jobs      submit: {"config_yaml": "..."} -> {"job_id", "run_dir"}; 400
//                          naming the key when the config does not load, 409 when a job runs
//   POST /api/v1/stop      ask the running job to save and stop (body: none or {})
//   POST /api/v1/chaos     {"action": "kill"|"hang"|"host"|"unslow", "rank": R}, {"action":
//                          "slow", "rank": R, "factor": F, "seconds": S}, {"action":
//                          "preempt", "rank": R, "seconds": S} or {"action": "host", "host":
//                          NAME}: rehearse a failure (400 naming the field of a bad body:
//                          factor in (1, 100], seconds 0..604800)
// (request bodies: monitor/api_requests.h)
//
// Every request but GET / (and GET /metrics with metrics_without_token) needs
// "Authorization: Bearer <token>" (jobctl/run_token.h): 401 naming the token file
// otherwise. Every request's Host header must name the server (monitor/request_guard.h):
// 421 otherwise. A POST body must be application/json (415), at most max_body_bytes
// (413, answered before the body is read; one the client sends without waiting for
// "100 Continue" is read and discarded first, up to kMaxDrainedBodyBytes), sent with
// Content-Length (411 for chunked); a POST without Content-Length and Transfer-Encoding
// has an empty body (RFC 9112 6.3).
// No CORS headers are ever sent, so a browser's preflight for a cross-origin request
// (which the bearer header and the JSON type force) always fails.
// The same operations as functions, for the CLI and tests. All read and write the store
// only: the HTTP server holds no job state of its own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/config.h"
#include "monitor/request_guard.h"
#include "store/store.h"
#include "wire/job_status.h"

namespace elastrain {

// The job's status: a JobStatus (wire/job_status.h, the record the CLI reads back) as
// JSON: {"job", "state", "reason", "generation", "world", "step", "steps", "failures",
//  "max_failures", "restarts", "latest_checkpoint_step", "run_dir", "num_workers", ...,
//  "ranks": [{"rank", "host", "agent", "worker", "pid", "step", "phase", "compute_seconds",
//             "wait_seconds", "timed_steps", "collective_seq", "collective_kind",
//             "in_collective", "straggler", "slowdown"}],
//  "agents": [{"id", "host", "slots", "preempting"}], "idle_workers": N, "time",
//  "hosts": [{"host", "health", "check", "reason", "checked_at", "expires_at",
//             "excluded_until"}], "gray_events": [{"time", "event", "detail"}]}
// NotFound when no job was ever submitted to the store.
Result<nlohmann::json> JobStatusJson(Store& store);
// The fields of JobStatusJson that come from the job's config: steps, num_workers,
// max_failures, checkpoint_period, cost_per_worker_hour, model_name (also used by
// `elastrain report`, which has only the run directory's config.yml).
nlohmann::json ConfigStatusFields(const TrainConfig& cfg);
// The run's events (for GET /api/v1/events).
Result<nlohmann::json> JobEventsJson(Store& store, size_t max_events = 1000);
// The newest `max_events` gray-failure events of the run (straggler_*, host_excluded,
// host_health, hang_diagnosed), each in a line (JobStatus::gray_events).
std::vector<JobStatusEvent> GrayEvents(const std::string& run_dir, size_t max_events);

struct JobApiOptions {
  bool embedded = false;  // the job runs inside this process (no submit; no "host" chaos)
  std::string token;      // the bearer token every request needs; required
  std::string token_file; // where the token is kept, named in 401 answers
  bool metrics_without_token = false;     // GET /metrics open to whoever reaches the port
  std::vector<std::string> allowed_hosts; // Host names answered besides the bind address
  std::string tls_cert, tls_key;          // PEM files: serve HTTPS (both or neither)
  size_t max_body_bytes = kMaxRequestBodyBytes;
};

class JobApiServer {
 public:
  JobApiServer(std::shared_ptr<Store> store, JobApiOptions options);
  ~JobApiServer();
  // Listens on host:port (port 0: any free port) in a background thread; returns the
  // base URL, e.g. "http://127.0.0.1:8265" or "https://...". Unavailable naming the
  // address when it cannot bind; InvalidArgument naming the files when the TLS
  // certificate or key do not load or there is no token. May be called again after a
  // failure (another port).
  Result<std::string> Start(const std::string& host, int port);
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace elastrain
