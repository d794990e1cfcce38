#include "launch/rank_env.h"

#include <algorithm>

namespace elastrain {

std::map<std::string, std::string> RankEnvironment(const RankAssignment& a) {
  // Hosts in the order of their lowest rank; local ranks in rank order within a host.
  std::vector<RankPeer> peers = a.members;
  std::sort(peers.begin(), peers.end(), [](const RankPeer& x, const RankPeer& y) { return x.rank < y.rank; });
  std::vector<std::string> hosts;
  std::string my_host;
  for (const RankPeer& p : peers)
    if (p.rank == a.rank) my_host = p.host;
  int local_rank = 0, local_world = 0;
  for (const RankPeer& p : peers) {
    if (std::find(hosts.begin(), hosts.end(), p.host) == hosts.end()) hosts.push_back(p.host);
    if (p.host != my_host) continue;
    if (p.rank < a.rank) ++local_rank;
    ++local_world;
  }
  if (local_world == 0) local_world = 1;  // this rank is not among the members: alone on its host
  const auto group = std::find(hosts.begin(), hosts.end(), my_host);
  const int group_rank = group == hosts.end() ? 0 : static_cast<int>(group - hosts.begin());
  const std::string s_rank = std::to_string(a.rank), s_world = std::to_string(a.world);
  return {
      {"RANK", s_rank},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", s_world},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"GROUP_RANK", std::to_string(group_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(std::max<size_t>(hosts.size(), 1))},
      {"ROLE_RANK", s_rank},
      {"ROLE_WORLD_SIZE", s_world},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", a.master_addr},
      {"MASTER_PORT", std::to_string(a.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(a.generation)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(a.max_failures)},
      {"TORCHELASTIC_RUN_ID", a.run_id},
      // Rank 0's process hosts the TCPStore at MASTER_PORT (no agent-side store).
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"OMP_NUM_THREADS", std::to_string(std::max(a.threads, 1))},
      {"ELASTRAIN_GENERATION", std::to_string(a.generation)},
      {"ELASTRAIN_RUN_DIR", a.run_dir},
      {"ELASTRAIN_WORLD_SIZE", s_world},
      {"ELASTRAIN_MIN_WORKERS", std::to_string(a.min_workers)},
      {"ELASTRAIN_MAX_WORKERS", std::to_string(a.max_workers)},
      {"ELASTRAIN_WORKER_ID", a.worker_id},
  };
}

const std::vector<std::string>& SecretEnvironmentPrefixes() {
  static const std::vector<std::string> p = {"ELASTRAIN_ETCD_", "ELASTRAIN_TOKEN"};
  return p;
}

}  // namespace elastrain
