#include "jobctl/job_control.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/safe_path.h"
#include "config/derived.h"
#include "jobctl/cluster_view.h"
#include "wire/job_state.h"

namespace elastrain {

namespace fs = std::filesystem;

Result<JobSpec> SubmitJob(Store& store, TrainConfig cfg) {
  auto current = ReadRecord<JobRecord>(store, keys::JobRecord());
  auto spec_now = ReadRecord<JobSpec>(store, keys::JobSpec());
  if (!current.ok()) return current.status();
  // A spec the head refuses (FailedPrecondition: not its signature, store/signed_records.h)
  // is no job: the new spec replaces it.
  if (!spec_now.ok() && spec_now.status().code() == StatusCode::kFailedPrecondition) spec_now = std::optional<JobSpec>();
  if (!spec_now.ok()) return spec_now.status();
  if (current.value() && spec_now.value() && current.value()->job_id == spec_now.value()->job_id) {
    if (!IsTerminal(current.value()->state))
      return Status::FailedPrecondition(fmt::format("job {} is {} in {}; stop it first (elastrain stop)",
                                                    current.value()->job_id, JobStateName(current.value()->state),
                                                    store.url()));
  }
  // The global batch is part of the job, whatever the world size of each generation.
  cfg.global_batch_size = GlobalBatchSize(cfg);
  std::error_code ec;
  cfg.base_output_directory = fs::absolute(cfg.base_output_directory, ec).lexically_normal().string();
  JobSpec spec;
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::gmtime(&now));
  spec.job_id = fmt::format("{}-{}-{}", cfg.run_name, stamp, ::getpid() % 10000);
  spec.run_dir = (fs::path(cfg.base_output_directory) / cfg.run_name).string();
  GuardDirectory(spec.run_dir);  // nothing below it is reached through a link
  spec.config_yaml = ConfigToYaml(cfg);
  spec.submitted_at = WallSeconds();
  // The previous job's record stays until the controller writes the new job's (readers
  // take a record of another job id for none): deleting it before the new spec is in
  // place would show a head that reads between the two writes the OLD spec without a
  // record, a job never run, and it would start the ended job again.
  for (const std::string& k : {keys::JobPlan(), keys::GenerationStop(), keys::JobControl()})
    ELASTRAIN_RETURN_IF_ERROR(store.Delete(k));
  ELASTRAIN_RETURN_IF_ERROR(store.DeletePrefix(keys::DepartedPrefix()));
  ELASTRAIN_RETURN_IF_ERROR(store.DeletePrefix(keys::kRoot + "commands/"));
  ELASTRAIN_RETURN_IF_ERROR(store.Put(keys::JobSpec(), ToJson(spec)).status());
  return spec;
}

Status RequestJobStop(Store& store) {
  ELASTRAIN_ASSIGN_OR_RETURN(JobView v, ReadJobView(store));
  JobControl c;
  c.stop = true;
  c.requested_at = WallSeconds();
  return store.Put(keys::JobControl(), ToJson(c)).status();
}

Status RequestChaos(Store& store, const std::string& action, int rank, const std::string& host, bool allow_host,
                    double factor, double seconds) {
  auto parsed = Parse<CommandAction>(action);
  if (!parsed.ok() || !IsChaosAction(parsed.value()))
    return Status::InvalidArgument("chaos action '" + action +
                                   "': expected kill, hang, host, slow, unslow or preempt");
  const bool slow = parsed.value() == CommandAction::kSlow, preempt = parsed.value() == CommandAction::kPreempt;
  if (slow && !(factor > 1 && factor <= kMaxSlowFactor))
    return Status::InvalidArgument(fmt::format("chaos slow: factor {}: expected a number in (1, {}]", factor,
                                               kMaxSlowFactor));
  if (slow && !(seconds >= 0 && seconds <= kMaxSlowSeconds))
    return Status::InvalidArgument(fmt::format("chaos slow: seconds {}: expected 0 (until unslow) to {}", seconds,
                                               kMaxSlowSeconds));
  if (preempt && !(seconds >= 0 && seconds <= kMaxSlowSeconds))
    return Status::InvalidArgument(fmt::format(
        "chaos preempt: seconds {}: expected 0 (the slot never returns) to {}", seconds, kMaxSlowSeconds));
  if (!slow && factor != 0) return Status::InvalidArgument("chaos " + action + ": only slow takes a factor");
  if (!slow && !preempt && seconds != 0)
    return Status::InvalidArgument("chaos " + action + ": only slow and preempt take seconds");
  if ((slow || preempt || parsed.value() == CommandAction::kUnslow) && rank < 0)
    return Status::InvalidArgument("chaos " + action + ": expected --rank R (a worker's, not a host's)");
  ELASTRAIN_ASSIGN_OR_RETURN(JobView v, ReadJobView(store));
  AgentCommand cmd;
  cmd.action = parsed.value();
  cmd.requested_at = WallSeconds();
  cmd.job_id = v.spec.job_id;
  cmd.factor = factor;
  cmd.seconds = seconds;
  std::string agent;
  if (cmd.action == CommandAction::kHost || (!host.empty() && rank < 0)) {
    if (!allow_host)
      return Status::InvalidArgument("chaos --host: an embedded job has one host, the job itself; use --rank");
    for (const AgentInfo& a : v.cluster.agents)
      if (a.host == host || a.id == host) agent = a.id;
    if (agent.empty()) return Status::InvalidArgument("chaos --host " + host + ": no live agent on that host");
    cmd.action = CommandAction::kHost;
  } else {
    if (!v.cluster.plan) return Status::FailedPrecondition("chaos --rank: no generation is running");
    for (const PlanMember& m : v.cluster.plan->members)
      if (m.rank == rank) {
        agent = m.agent;
        cmd.worker = m.worker;
      }
    if (agent.empty())
      return Status::InvalidArgument(fmt::format("chaos --rank {}: generation {} has ranks 0..{}", rank,
                                                 v.cluster.plan->generation, v.cluster.plan->world - 1));
  }
  return store.Put(fmt::format("{}chaos-{:.6f}", keys::CommandPrefix(agent), cmd.requested_at), ToJson(cmd)).status();
}

}  // namespace elastrain
