// Job control: what the HTTP API, the CLI and tests do to a job, by writing the store
// only (the controller reads it back): submit a job, ask it to stop, rehearse a failure.
// Authorisation (the bearer token, jobctl/run_token.h) is the caller's business, and so
// is the run's token file (an embedded run's, created by `elastrain train`).
#pragma once

#include <string>

#include "common/status.h"
#include "config/config.h"
#include "store/store.h"
#include "wire/protocol.h"

namespace elastrain {

// Writes a new job into the store: its config (global_batch_size fixed, the output
// directory made absolute) under a fresh job id. FailedPrecondition when another job
// is still running there. Clears the previous job's plan, requests and commands.
Result<JobSpec> SubmitJob(Store& store, TrainConfig cfg);

// Asks the running job to save and stop. NotFound when no job was submitted.
Status RequestJobStop(Store& store);
// Resolves a rank (of the current generation) or a host to its agent and queues the
// command there. InvalidArgument naming the rank or host when there is none;
// `allow_host` false (embedded mode: one host, the job itself) refuses "host".
// slow carries `factor` in (1, kMaxSlowFactor] and `seconds` in [0, kMaxSlowSeconds]
// (wire/protocol.h; InvalidArgument naming the value otherwise); preempt carries `seconds`
// in [0, kMaxSlowSeconds] (when its slot returns; 0: never); the other actions neither.
Status RequestChaos(Store& store, const std::string& action, int rank, const std::string& host, bool allow_host,
                    double factor = 0, double seconds = 0);

}  // namespace elastrain
