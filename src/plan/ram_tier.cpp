#include "plan/ram_tier.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace elastrain {

std::vector<std::vector<int>> BuddyRanks(const std::vector<std::string>& host_of_rank, int replicas) {
  const int world = static_cast<int>(host_of_rank.size());
  // Hosts in order of first appearance, and each host's ranks in order.
  std::vector<std::string> hosts;
  std::map<std::string, std::vector<int>> ranks_of;
  for (int r = 0; r < world; ++r) {
    auto& list = ranks_of[host_of_rank[r]];
    if (list.empty()) hosts.push_back(host_of_rank[r]);
    list.push_back(r);
  }
  const int h_count = static_cast<int>(hosts.size());
  std::map<std::string, int> host_index;
  for (int h = 0; h < h_count; ++h) host_index[hosts[h]] = h;
  size_t max_per_host = 0;
  for (const auto& [host, list] : ranks_of) max_per_host = std::max(max_per_host, list.size());

  const int want = std::max(0, std::min(replicas, world - 1));
  std::vector<std::vector<int>> buddies(world);
  for (int r = 0; r < world; ++r) {
    const int h = host_index[host_of_rank[r]];
    const auto& mine = ranks_of[host_of_rank[r]];
    const size_t pos = static_cast<size_t>(std::find(mine.begin(), mine.end(), r) - mine.begin());
    // Best first: the other hosts round-robin around the ring (copy k on the k-th next
    // host), each time the rank at r's position there (so that one host's sends spread
    // over the next host's ranks); then the other ranks of r's own host. Stops once full.
    std::vector<int>& mine_out = buddies[r];
    std::set<int> used;
    auto take = [&](int b) {
      if (b != r && used.insert(b).second) mine_out.push_back(b);
      return static_cast<int>(mine_out.size()) >= want;
    };
    bool full = want == 0;
    for (size_t round = 0; !full && round < max_per_host; ++round)
      for (int step = 1; !full && step < h_count; ++step) {
        const auto& there = ranks_of[hosts[(h + step) % h_count]];
        if (round < there.size()) full = take(there[(pos + round) % there.size()]);
      }
    for (size_t i = 1; !full && i < mine.size(); ++i) full = take(mine[(pos + i) % mine.size()]);
  }
  return buddies;
}

PeerRestoreChoice ChoosePeerRestore(int old_world, const std::vector<bool>& survivors,
                                    const std::vector<ShardCopy>& copies, int64_t disk_step) {
  PeerRestoreChoice out;
  if (old_world <= 0) {
    out.why = fmt::format("no shards to restore (old world {})", old_world);
    return out;
  }
  auto alive = [&](int r) { return r >= 0 && r < static_cast<int>(survivors.size()) && survivors[r]; };
  // step -> owner -> holders (surviving, in range)
  std::map<int64_t, std::map<int, std::set<int>>> held;
  for (const ShardCopy& c : copies)
    if (c.owner >= 0 && c.owner < old_world && alive(c.holder) && c.step >= 0) held[c.step][c.owner].insert(c.holder);

  // The newest step whose every shard survives somewhere.
  std::string missing;  // for the newest step seen: which shard had no surviving copy
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    const auto& owners = it->second;
    int lost = -1;
    for (int o = 0; o < old_world && lost < 0; ++o)
      if (!owners.count(o)) lost = o;
    if (lost >= 0) {
      if (missing.empty())
        missing = fmt::format("step {}: no surviving copy of shard {} ({})", it->first, lost,
                              alive(lost) ? "its owner holds another step, and no live buddy holds this one"
                                          : "its owner was lost, and no live buddy holds a complete copy");
      continue;
    }
    if (it->first < disk_step) {
      out.why = fmt::format("the newest step whole in memory, {}, is older than the disk checkpoint of step {}",
                            it->first, disk_step);
      return out;
    }
    out.from_memory = true;
    out.step = it->first;
    out.source.assign(old_world, -1);
    std::map<int, int> load;
    for (int o = 0; o < old_world; ++o) {
      // The owner itself, else the holder serving the fewest shards so far, else the lowest rank.
      auto key = [&](int h) { return std::make_tuple(h != o, load[h], h); };
      const auto& holders = owners.at(o);
      const int best = *std::min_element(holders.begin(), holders.end(), [&](int a, int b) { return key(a) < key(b); });
      out.source[o] = best;
      ++load[best];
    }
    int served_by_buddies = 0;
    for (int o = 0; o < old_world; ++o) served_by_buddies += out.source[o] != o;
    out.why = fmt::format("every shard of step {} survives in memory ({} of {} from a buddy's copy)", out.step,
                          served_by_buddies, old_world);
    return out;
  }
  out.why = missing.empty() ? "no snapshot in memory" : missing;
  return out;
}

}  // namespace elastrain
