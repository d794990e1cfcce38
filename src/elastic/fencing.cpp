#include "elastic/fencing.h"

#include <algorithm>

#include <fmt/format.h>

namespace elastrain {

namespace {

Status Refuse(const std::string& what, const std::string& why) {
  return Status::PermissionDenied(fmt::format("refused {}: {}", what, why));
}

}  // namespace

Status CheckPlan(const Plan& p, const JobSpec& job, const std::string& store_url, const std::string& agent_id,
                 const std::vector<std::string>& my_workers) {
  const std::string what = fmt::format("plan of generation {}", p.generation);
  if (p.job_id != job.job_id) return Refuse(what, fmt::format("it is for job '{}', not {}", p.job_id, job.job_id));
  if (p.generation < 0) return Refuse(what, "expected a generation >= 0");
  if (p.world < 1 || p.world > kMaxPlanWorld)
    return Refuse(what, fmt::format("world {}: expected 1..{}", p.world, kMaxPlanWorld));
  if (p.members.size() != static_cast<size_t>(p.world))
    return Refuse(what, fmt::format("{} members for a world of {}", p.members.size(), p.world));
  for (int d : {p.data, p.fsdp, p.tensor})
    if (d < 1 || d > p.world) return Refuse(what, fmt::format("mesh {}x{}x{}: expected degrees in 1..world", p.data, p.fsdp, p.tensor));
  if (static_cast<int64_t>(p.data) * p.fsdp * p.tensor != p.world)
    return Refuse(what, fmt::format("mesh {}x{}x{} is not the world {}", p.data, p.fsdp, p.tensor, p.world));
  std::vector<bool> seen(static_cast<size_t>(p.world), false);
  for (const PlanMember& m : p.members) {
    if (m.rank < 0 || m.rank >= p.world || seen[static_cast<size_t>(m.rank)])
      return Refuse(what, fmt::format("rank {} is outside 0..{} or given twice", m.rank, p.world - 1));
    seen[static_cast<size_t>(m.rank)] = true;
    if (m.agent == agent_id && std::find(my_workers.begin(), my_workers.end(), m.worker) == my_workers.end())
      return Refuse(what, fmt::format("rank {} names worker '{}', which this agent does not run", m.rank, m.worker));
  }
  if (p.restore.kind == RestoreKind::kMemory && (p.restore.source_rank < 0 || p.restore.source_rank >= p.world))
    return Refuse(what, fmt::format("restore source rank {} is not a rank", p.restore.source_rank));
  if (p.restore.step < -1) return Refuse(what, fmt::format("restore step {}: expected >= -1", p.restore.step));
  if (p.restore.kind == RestoreKind::kPeers) {
    const RestorePlan& r = p.restore;
    constexpr int kMaxShards = 1 << 20;
    if (r.old_fsdp < 1 || r.old_tensor < 1 || r.old_fsdp > kMaxShards / r.old_tensor)
      return Refuse(what, fmt::format("peer restore of an fsdp={} tensor={} mesh: expected degrees >= 1 with at most "
                                      "{} shards", r.old_fsdp, r.old_tensor, kMaxShards));
    if (r.sources.size() != static_cast<size_t>(r.old_fsdp * r.old_tensor) || r.step < 0 || r.old_generation < 0)
      return Refuse(what, fmt::format("peer restore names {} sources for {} shards (step {}, generation {})",
                                      r.sources.size(), r.old_fsdp * r.old_tensor, r.step, r.old_generation));
    for (int s : r.sources)
      if (s < 0 || s >= p.world) return Refuse(what, fmt::format("peer restore source rank {} is not a rank", s));
  }
  const RendezvousAddress expected = RendezvousForJob(job, store_url);
  if (!(p.rendezvous == expected))
    return Refuse(what, fmt::format("rendezvous '{}' is not this job's ({})", p.rendezvous.ToString(),
                                    expected.ToString()));
  return Status::OK();
}

Status CheckStop(const GenerationStop& stop, const std::string& job_id) {
  if (stop.job_id != job_id)
    return Refuse(fmt::format("stop of generation {}", stop.generation),
                  fmt::format("it is for job '{}', not {}", stop.job_id, job_id));
  return Status::OK();
}

Status CheckCommand(const AgentCommand& c, const std::string& job_id) {
  const std::string what = fmt::format("command {} {}", Name(c.action), c.worker);
  if (c.job_id != job_id) return Refuse(what, fmt::format("it is for job '{}', not {}", c.job_id, job_id));
  const bool of_host = c.action == CommandAction::kHost || c.action == CommandAction::kCheckHealth;
  if (of_host != c.worker.empty())
    return Refuse(what, "expected a worker for every action but host and check_health, and none for those");
  return Status::OK();
}

}  // namespace elastrain
