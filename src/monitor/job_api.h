// The controller's HTTP API (cpp-httplib), served by `elastrain head` and by the embedded
// `elastrain train` (dashboard_host:dashboard_port, Ray's 8265 by default):
//   GET  /api/v1/job       the job's status (JobStatusJson)
//   GET  /api/v1/events    the run's events.jsonl as a JSON array (the last 1000)
//   POST /api/v1/jobs      submit: {"config_yaml": "..."} -> {"job_id": ...}; 400 naming
//                          the key when the config does not load, 409 when a job runs
//   GET  /metrics          Prometheus text format (monitor/prometheus.h)
//   GET  /                 the live dashboard (monitor/dashboard.h)
//   GET  /api/v1/checkpoints, /api/v1/goodput, /api/v1/dashboard (JSON)
//   POST /api/v1/stop      ask the running job to save and stop
//   POST /api/v1/chaos     {"action": "kill"|"hang"|"host", "rank": R} or {"action":
//                          "host", "host": NAME}: rehearse a failure
// POST /stop and /chaos need "Authorization: Bearer <token>" with the run's token
// (monitor/run_token.h); without it they answer 401 and change nothing.
// The same operations as functions, for the CLI and tests. All read and write the store
// only: the HTTP server holds no job state of its own.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/config.h"
#include "store/store.h"

namespace elastrain {

// {"job", "state", "reason", "generation", "world", "step", "steps", "failures",
//  "max_failures", "restarts", "latest_checkpoint_step", "run_dir", "num_workers",
//  "ranks": [{"rank", "host", "agent", "worker", "pid", "step", "phase"}],
//  "agents": [{"id", "host", "slots", "preempting"}], "idle_workers": N}
// NotFound when no job was ever submitted to the store.
Result<nlohmann::json> JobStatusJson(Store& store);
// The fields of JobStatusJson that come from the job's config: steps, num_workers,
// max_failures, checkpoint_period, cost_per_worker_hour, model_name (also used by
// `elastrain report`, which has only the run directory's config.yml).
nlohmann::json ConfigStatusFields(const TrainConfig& cfg);
// The run's events (for GET /api/v1/events).
Result<nlohmann::json> JobEventsJson(Store& store, size_t max_events = 1000);

class JobApiServer {
 public:
  // embedded: the job runs inside this process (no submit; no "host" chaos).
  JobApiServer(std::shared_ptr<Store> store, bool embedded);
  ~JobApiServer();
  // Listens on host:port (port 0: any free port) in a background thread; returns the
  // base URL, e.g. "http://127.0.0.1:8265". Unavailable naming the address when it
  // cannot bind.
  Result<std::string> Start(const std::string& host, int port);
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace elastrain
