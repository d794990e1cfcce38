// One reader of the job's cluster view from the store: what the controller observes
// before each decision (Controller::Observe), what the HTTP API and the CLI show. The
// records are parsed once, here; records that do not parse are skipped (a forged or
// half-written record never stops the reader).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "store/store.h"
#include "wire/protocol.h"

namespace elastrain {

struct ClusterView {
  std::optional<JobRecord> record;   // the job's record (none before its first decision)
  std::optional<Plan> plan;          // the job's current plan
  int64_t plan_revision = 0;         // the plan key's revision, for compare-and-swap (0: none)
  std::vector<AgentInfo> agents;     // live agents (their leases hold)
  std::vector<AgentReport> reports;  // the live agents' reports
  std::vector<AgentReport> departed; // last reports of agents that left since the last plan
  bool stop_requested = false;       // `elastrain stop` asked the job to end

  // The host of agent `id`; empty when it is not live.
  std::string HostOf(const std::string& agent_id) const;
  // (agent, worker) for every worker of the live reports.
  std::vector<std::pair<std::string, WorkerRecord>> Workers() const;
};

// Reads the view of job `job_id`: a record or plan of another job counts as none.
Result<ClusterView> ReadClusterView(Store& store, const std::string& job_id);

// The submitted job and its view; NotFound naming the store when no job was submitted.
struct JobView {
  JobSpec spec;
  ClusterView cluster;
};
Result<JobView> ReadJobView(Store& store);

}  // namespace elastrain
