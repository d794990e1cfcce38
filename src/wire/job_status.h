// What the control API answers about the job (GET /api/v1/job) and about a submission
// (POST /api/v1/jobs): one record each, written by the server (monitor/job_api.cpp) and
// read back by the CLI (cli/api_client.h), so both ends agree on the JSON by
// construction. The dashboard (web/dashboard.html), /metrics and `elastrain report` read
// the same keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "wire/job_state.h"

namespace elastrain {

// A live agent, as the status shows it.
struct JobStatusAgent {
  std::string id;
  std::string host;
  int slots = 0;
  bool preempting = false;
  std::string not_planned;  // why its host is kept out of plans (health checks, exclusion); "" when it is not
};

// A rank of the current generation's plan.
struct JobStatusRank {
  int rank = 0;
  std::string host, agent, worker;
  int pid = 0;
  int64_t step = -1;              // -1: its worker has not reported
  std::string phase = "unknown";  // the worker's phase, or its training phase while running
  // Its step anatomy (WorkerRecord, wire/protocol.h): medians over its last timed_steps steps.
  double compute_seconds = 0;     // per step: forward, backward, update, its own I/O
  double wait_seconds = 0;        // per step: blocked in collectives
  int64_t timed_steps = 0;        // 0: not timed yet
  // The collective it entered last (-1: none yet) and whether it is still inside.
  int64_t collective_seq = -1;
  std::string collective_kind;
  bool in_collective = false;
  bool straggler = false;         // the controller detected it as a straggler (JobRecord::stragglers)
  double slowdown = 0;            // its compute time / the median rank's, as last measured (0: none)
};

// A host with a health record (keys::Health) or excluded for a gray failure. Only a
// cluster store has health records; an embedded job has none.
struct JobStatusHost {
  std::string host;
  std::string health = "unchecked";  // healthy | unhealthy | expired | unchecked
  std::string check;                 // builtin | the command
  std::string reason;                // why it failed
  double checked_at = 0, expires_at = 0;
  double excluded_until = 0;         // > the status's time: excluded until then
};

// One of the run's gray-failure events (straggler_detected, straggler_cleared,
// host_excluded, host_health, hang_diagnosed), newest last, in a line.
struct JobStatusEvent {
  double time = 0;
  std::string event;
  std::string detail;  // "rank 1 on h2: 2.04x the median compute since step 40"
};

struct JobStatus {
  std::string job;      // the job id
  std::string run_dir;
  // From the job's config ("" / 0 when it does not load).
  int64_t steps = 0;
  std::string num_workers;  // "N" or "MIN:MAX", as the config gives it
  int64_t max_failures = 0;
  int64_t checkpoint_period = 0;
  double cost_per_worker_hour = 0;
  std::string model_name;
  // A launched program's job (`elastrain launch`, `submit -- PROGRAM`): its steps and
  // checkpoints are the ones it reports (elastrain_worker, docs/launch.md), and a program
  // that reports none leaves them unknown, not 0 and -1.
  bool launched = false;
  // From the controller's job record (wire/protocol.h JobRecord).
  JobState state = JobState::kPending;
  std::string reason;
  int64_t generation = -1;
  int world = 0;
  int64_t step = 0;
  int64_t failures = 0;
  int64_t restarts = 0;
  int64_t latest_checkpoint_step = -1;
  double started_at = 0, ended_at = 0;
  std::vector<JobStatusAgent> agents;
  std::vector<JobStatusRank> ranks;
  int idle_workers = 0;
  double time = 0;                       // when the status was read (wall seconds)
  std::vector<JobStatusHost> hosts;
  std::vector<JobStatusEvent> gray_events;  // the newest kMaxStatusGrayEvents
  // The head that leads (keys::Head(), wire/protocol.h HeadRecord); "" when none does.
  std::string leader, leader_url;
};
inline constexpr size_t kMaxStatusGrayEvents = 10;

// POST /api/v1/jobs's answer.
struct SubmittedJob {
  std::string job_id;
  std::string run_dir;
};

nlohmann::json ToJsonValue(const JobStatus& s);
nlohmann::json ToJsonValue(const SubmittedJob& s);
// Strict reads (common/json.h): a field of the wrong type, an integer out of range, an
// unknown state name, or a missing key that identifies the answer (for a status: job,
// run_dir, state, generation, world, step; for a submission: both) is Corruption
// "<what>: field '<path>': ...". Other missing keys keep their defaults (a head of
// another version). Never throw.
Result<JobStatus> JobStatusFromJson(const nlohmann::json& j, std::string_view what);
Result<SubmittedJob> SubmittedJobFromJson(const nlohmann::json& j, std::string_view what);

// What `elastrain status` prints: the job, its per-rank table (rank, host, step, compute
// s, wait s, last collective; a straggler marked), the hosts' health and exclusions, and
// the gray-failure events.
std::string FormatJobStatus(const JobStatus& s);

}  // namespace elastrain
