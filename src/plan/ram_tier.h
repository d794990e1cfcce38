// The RAM tier of a sharded job (issue #18), its two decisions as pure functions:
//
//   BuddyRanks         where each rank's shard copies go: `replicas` other ranks, on other
//                      hosts where there are any (a ring over hosts), so that one host's
//                      loss never takes a shard and all its copies.
//   ChoosePeerRestore  after a failure, whether the survivors' RAM holds one whole step
//                      (every shard of the old layout, from its owner or a buddy), the
//                      newest such step, and which survivor serves each shard; or why not,
//                      so that the plan falls back to the newest disk checkpoint.
//
// Here, in plan/, because both sides use them: the trainer places its copies with
// BuddyRanks (train/ram_tier_copies.h), the controller plans with ChoosePeerRestore
// (elastic/policy.cpp). A shard (owner) is a shard id of the old mesh: fsdp coordinate *
// tensor + tensor coordinate; holders are old ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace elastrain {

// host_of_rank[r]: the host of rank r. Returns buddies[r]: the ranks holding copies of r's
// shard, min(replicas, world - 1) of them, distinct, never r; ranks of other hosts first
// (the next hosts around the ring of hosts, in order of first appearance), then ranks of
// r's own host. Deterministic: every rank computes the same table.
std::vector<std::vector<int>> BuddyRanks(const std::vector<std::string>& host_of_rank, int replicas);

// One complete copy of one shard of the old layout, as a survivor reports it.
struct ShardCopy {
  int owner = -1;     // the old rank whose shard this is
  int holder = -1;    // the old rank holding it (== owner: its own state)
  int64_t step = -1;  // the step the copy is of (the state after that step's update)
};

struct PeerRestoreChoice {
  bool from_memory = false;
  int64_t step = -1;            // the step restored (from_memory)
  std::vector<int> source;      // source[owner]: the old rank serving that shard
  std::string why;              // the reason, either way, for events.jsonl
};

// old_world: the old layout's shards (owners 0..old_world-1); survivors[r]: old rank r is
// alive and can serve (indexed by holder, which may exceed old_world when data replicas
// hold the same shards); copies: every complete copy the survivors hold (others are ignored); disk_step: the newest committed
// disk checkpoint's step (-1: none). Memory wins when it holds a whole step at least as
// new as disk_step; among holders of a shard the owner is preferred, then the holder
// serving the fewest shards so far (spreading the sends), then the lowest rank.
PeerRestoreChoice ChoosePeerRestore(int old_world, const std::vector<bool>& survivors,
                                    const std::vector<ShardCopy>& copies, int64_t disk_step);

}  // namespace elastrain
