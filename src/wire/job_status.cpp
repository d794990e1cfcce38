#include "wire/job_status.h"

#include "common/json.h"
#include "wire/vocab_json.h"

namespace elastrain {

ELASTRAIN_JSON_RECORD(JobStatusAgent, id, host, slots, preempting, not_planned)
ELASTRAIN_JSON_RECORD(JobStatusRank, rank, host, agent, worker, pid, step, phase)
ELASTRAIN_JSON_RECORD(JobStatus, job, run_dir, steps, num_workers, max_failures, checkpoint_period,
                      cost_per_worker_hour, model_name, state, reason, generation, world, step, failures, restarts,
                      latest_checkpoint_step, started_at, ended_at, agents, ranks, idle_workers)
ELASTRAIN_JSON_RECORD(SubmittedJob, job_id, run_dir)

nlohmann::json ToJsonValue(const JobStatus& s) { return s; }
nlohmann::json ToJsonValue(const SubmittedJob& s) { return s; }

Result<JobStatus> JobStatusFromJson(const nlohmann::json& j, std::string_view what) {
  return ParseRecord<JobStatus>(j, what, {.required = {"job", "run_dir", "state", "generation", "world", "step"}});
}

Result<SubmittedJob> SubmittedJobFromJson(const nlohmann::json& j, std::string_view what) {
  return ParseRecord<SubmittedJob>(j, what, {.required = {"job_id", "run_dir"}});
}

}  // namespace elastrain
