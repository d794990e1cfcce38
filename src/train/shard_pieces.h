// What one rank of a mesh owns of the training state, as pieces of global tensors
// (ckpt/format.h): the description a checkpoint writes for each shard, and the one a
// restore from peers' RAM (train/peer_restore.h) computes for a rank of an old mesh,
// whose state this process never held.
#pragma once

#include <cstdint>
#include <vector>

#include "ckpt/format.h"
#include "plan/mesh.h"
#include "plan/sharding.h"
#include "model/layout.h"
#include "model/model_config.h"
#include "train/train_state.h"

namespace elastrain {

// The pieces of `runs` (a rank's owned runs of the tensor-local `local` layout), in run
// order, and each one's offset in the shard buffers. for_saving: replicated tensors only
// from tensor rank 0 (every tensor rank holds them; one copy is enough).
std::vector<ckpt::PieceSpec> PiecesOf(const std::vector<OwnedRun>& runs, const ParamLayout& local,
                                      const std::vector<TensorSharding>& sharding, int tensor_rank, bool for_saving,
                                      std::vector<int64_t>* shard_offsets);

struct ShardContents {
  int64_t shard_size = 0;                 // floats of each shard buffer (params, adam_m, adam_v)
  std::vector<ckpt::PieceSpec> pieces;
  std::vector<int64_t> offsets;           // offsets[i]: where pieces[i] starts in a shard buffer
};
// The shard of the rank at `coords` of `mesh` for the model `global`, as TrainState lays it
// out; no buffer is allocated. `mesh` must suit the model (CheckTensorDivides).
ShardContents ShardOf(const ModelConfig& global, const Mesh& mesh, MeshCoords coords, bool for_saving);

}  // namespace elastrain
