// The training state of one rank and how ranks keep it consistent:
//   - params: the tensor-LOCAL parameters, whole (the working copy every forward reads);
//   - grads: their gradients, accumulated over the rank's micro-batches;
//   - AdamW m and v: only this rank's FSDP shard of the tensor-local flat buffer.
// A step is: ZeroGrads -> (forward/backward into grads) -> ReduceGradients
// (reduce-scatter over fsdp, allreduce of the shard over data) -> ClipGradients (global
// norm over the whole model) -> Update (AdamW on the shard) -> GatherParams (allgather
// over fsdp). With fsdp = 1 the shard is the whole buffer and the reduction is one
// bucketed allreduce over the data axis (plain data parallelism).
// Departure from ZeRO-3 (docs/parallelism.md): the working parameters are gathered once
// per step for the whole model, not layer by layer, so parameter memory is not yet
// sharded during compute; gradients' reduced shard and the AdamW moments are.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/mesh.h"
#include "comm/process_group.h"
#include "comm/sharding.h"
#include "model/layout.h"
#include "model/model_config.h"
#include "optim/optim.h"

namespace elastrain {

// The groups of one rank (any may have size 1). Not owned.
struct RankGroups {
  ProcessGroup* world = nullptr;
  ProcessGroup* tensor = nullptr;
  ProcessGroup* fsdp = nullptr;
  ProcessGroup* data = nullptr;
};

class TrainState {
 public:
  // `global` is the whole model; the state holds the tensor-local slice for `coords`.
  TrainState(const ModelConfig& global, const Mesh& mesh, MeshCoords coords, RankGroups groups);

  const ParamLayout& local_layout() const { return local_layout_; }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  int64_t local_size() const { return local_layout_.total; }

  // Initialises from init_weights_seed exactly as a single process would (the global
  // tensors are drawn, then this rank keeps its slices).
  void InitParams(uint64_t seed);
  void ZeroGrads();
  Status ReduceGradients();
  // Global-norm clipping of the reduced shard; returns the norm before clipping.
  Result<double> ClipGradients(double threshold);
  void Update(int64_t step, double lr, const AdamWOptions& opt);
  Status GatherParams();
  // The whole model's parameters in the global layout (every rank gets them; collective
  // over the world). For tests and exports.
  Result<std::vector<float>> GatherGlobalParams();

 private:
  float* shard_grads();  // the reduced gradient of this rank's shard
  // Copies between a tensor-local flat buffer and the global one, for tensor rank t.
  void LocalToGlobal(const float* local, int t, float* global) const;
  void GlobalToLocal(const float* global, int t, float* local) const;

  ModelConfig global_;
  ModelConfig local_;
  ParamLayout global_layout_, local_layout_;
  std::vector<TensorSharding> sharding_;
  Mesh mesh_;
  MeshCoords coords_;
  RankGroups g_;
  IndexRange shard_;  // this rank's range of the padded local flat buffer
  int64_t padded_ = 0;
  std::vector<float> params_, grads_;  // padded_ floats each
  std::vector<float> m_, v_;            // shard_.size() floats each
  std::vector<float> shard_buf_;        // reduce-scatter output / allgather input
  // Per shard element: 1 for tensor-parallel-split tensors, 1/tensor for replicated
  // ones (every tensor rank holds them), 0 in the padding: weights of the global norm.
  std::vector<float> norm_weight_;
};

}  // namespace elastrain
