// What an agent accepts from the store. Plans, generation stops and commands are records
// that anyone able to write to the store could forge or leave behind from an older job;
// the agent acts only on those consistent with the job it runs (docs/security.md):
//   a plan        of this job, a real mesh over ranks 0..world-1, each rank once, whose
//                 rendezvous is this job's own (RendezvousForJob), a restore source among
//                 its ranks, and members that name this agent only with its own workers
//   a stop        of this job
//   a command     of this job, naming one of this agent's workers (none for `host`)
// Pure functions: unit-tested in tests/unit/elastic_agent_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "wire/protocol.h"

namespace elastrain {

// The most ranks a plan may have (a bound for hostile records, far above any real job).
inline constexpr int kMaxPlanWorld = 1 << 16;

// `my_workers`: the ids of this agent's workers (live or recently exited).
Status CheckPlan(const Plan& plan, const JobSpec& job, const std::string& store_url, const std::string& agent_id,
                 const std::vector<std::string>& my_workers);
Status CheckStop(const GenerationStop& stop, const std::string& job_id);
Status CheckCommand(const AgentCommand& command, const std::string& job_id);

}  // namespace elastrain
