// Restoring a sharded state from peers' RAM onto any mesh (issue #18): which floats of
// which old shard go to which new rank. The old layout is fsdp x tensor shards (data
// replicas hold the same shards); sources[shard] is the new rank that holds shard
// `shard` of the chosen step (plan/ram_tier.h chose it). Every rank computes the same
// plan, so senders and receivers agree on every transfer without asking each other. The
// arithmetic is the disk path's (ckpt/reader.cpp): both sides' pieces in global indices.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/mesh.h"
#include "common/status.h"
#include "model/model_config.h"

namespace elastrain {

// n floats from offset `src` of an old shard buffer to offset `dst` of a new one (the
// same offsets in params, adam_m and adam_v).
struct ShardRunCopy {
  int64_t src = 0, dst = 0, n = 0;
};

struct PeerTransfer {
  int shard = 0;     // old shard id (fsdp coordinate * tensor + tensor coordinate)
  int from = 0;      // new rank that holds it
  int to = 0;        // new rank that needs part of it
  std::vector<ShardRunCopy> runs;
  int64_t floats() const;  // per buffer
};

struct PeerRestorePlan {
  int64_t old_shard_size = 0;        // floats of each old shard buffer
  std::vector<PeerTransfer> transfers;  // ordered by (to, shard)
};

// The plan for every new rank of `mesh`. InvalidArgument when the old degrees do not suit
// the model or the sources do not name one new rank per old shard; Internal if the old
// shards would not cover a new rank's shard (a bug).
Result<PeerRestorePlan> PlanPeerRestore(const ModelConfig& model, int old_fsdp, int old_tensor, const Mesh& mesh,
                                        const std::vector<int>& sources);

}  // namespace elastrain
