#include "jobctl/cluster_view.h"

namespace elastrain {

namespace {
template <typename T>
Result<std::vector<T>> ReadAll(Store& store, const std::string& prefix) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, store.List(prefix));
  std::vector<T> out;
  for (const KeyValue& kv : kvs) {
    T v;
    if (FromJson(kv.value, &v).ok()) out.push_back(std::move(v));
  }
  return out;
}
}  // namespace

std::string ClusterView::HostOf(const std::string& agent_id) const {
  for (const AgentInfo& a : agents)
    if (a.id == agent_id) return a.host;
  return "";
}

std::vector<std::pair<std::string, WorkerRecord>> ClusterView::Workers() const {
  std::vector<std::pair<std::string, WorkerRecord>> out;
  for (const AgentReport& r : reports)
    for (const WorkerRecord& w : r.workers) out.push_back({r.agent, w});
  return out;
}

Result<ClusterView> ReadClusterView(Store& store, const std::string& job_id) {
  ClusterView v;
  ELASTRAIN_ASSIGN_OR_RETURN(v.agents, ReadAll<AgentInfo>(store, keys::AgentsPrefix()));
  ELASTRAIN_ASSIGN_OR_RETURN(v.reports, ReadAll<AgentReport>(store, keys::ReportsPrefix()));
  ELASTRAIN_ASSIGN_OR_RETURN(v.departed, ReadAll<AgentReport>(store, keys::DepartedPrefix()));
  ELASTRAIN_ASSIGN_OR_RETURN(v.plan, ReadRecord<Plan>(store, keys::JobPlan(), &v.plan_revision));
  if (v.plan && v.plan->job_id != job_id) v.plan.reset();
  ELASTRAIN_ASSIGN_OR_RETURN(v.record, ReadRecord<JobRecord>(store, keys::JobRecord()));
  if (v.record && v.record->job_id != job_id) v.record.reset();
  ELASTRAIN_ASSIGN_OR_RETURN(std::optional<JobControl> control, ReadRecord<JobControl>(store, keys::JobControl()));
  v.stop_requested = control && control->stop;
  return v;
}

Result<JobView> ReadJobView(Store& store) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::optional<JobSpec> spec, ReadRecord<JobSpec>(store, keys::JobSpec()));
  if (!spec) return Status::NotFound("no job has been submitted to " + store.url());
  JobView v;
  v.spec = *spec;
  ELASTRAIN_ASSIGN_OR_RETURN(v.cluster, ReadClusterView(store, v.spec.job_id));
  return v;
}

}  // namespace elastrain
