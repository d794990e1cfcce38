// What each rank of a Mesh holds, as explicit printable data (docs/parallelism.md):
//   tensor axis: Megatron-style. Column-parallel weights (wq, wk, wv, their biases, the
//     all-heads QK-norm scales, w_gate, w_up, b_up) split dim 0 (heads / MLP rows); row-parallel weights (wo,
//     w_down) split dim 1; everything else (norms -- post norms and the per-head-dim QK-norm
//     scales included --, embeddings, lm_head, bo, b_down) is replicated. A rank's tensors form the layout of the tensor-LOCAL ModelConfig
//     (heads / tensor, kv heads / tensor, mlp_dim / tensor), so the local model is an
//     ordinary model over its own flat buffer.
//   fsdp axis: each fsdp rank owns a contiguous 1/fsdp slice of the (tensor-local) flat
//     buffer -- parameters, gradients and both AdamW moments alike -- padded to a
//     multiple of fsdp.
//   data axis: full replicas of the fsdp shard.
// Also the per-rank memory, FLOP and collective-volume estimate printed by `elastrain plan`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/mesh.h"
#include "model/layout.h"
#include "model/model_config.h"

namespace elastrain {

enum class TensorSplit {
  kReplicated,  // every tensor rank holds the whole tensor
  kColumn,      // dim 0 split: output rows (heads, MLP rows)
  kRow,         // dim 1 split: input columns (the other side of the same heads / rows)
};
const char* TensorSplitName(TensorSplit s);  // "replicated" / "column (dim 0)" / "row (dim 1)"
// The rule, from the tensor's name ("layers.3.attn.wq" -> kColumn).
TensorSplit TensorSplitFor(const std::string& name);

// [begin, end) along one dimension, or of a flat buffer.
struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const IndexRange&) const = default;
};

struct TensorSharding {
  std::string name;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> local_shape;  // global_shape with split_dim divided by tensor
  TensorSplit split = TensorSplit::kReplicated;
  int split_dim = -1;                // 0, 1, or -1 when replicated
  int tensor = 1;                    // the tensor degree
  // The slice of the global tensor that tensor rank `t` holds, along split_dim; the
  // whole of dim 0 when replicated.
  IndexRange GlobalSlice(int t) const;
};

// The tensor-parallel local config: num_heads, num_kv_heads and mlp_dim divided by
// `tensor`, every other field equal. Fails as CheckTensorDivides does.
Result<ModelConfig> TensorLocalConfig(const ModelConfig& m, int tensor);
// One entry per tensor of BuildParamLayout(m), in layout order. `tensor` must divide
// (CheckTensorDivides; CHECKed).
std::vector<TensorSharding> ShardingTable(const ModelConfig& m, int tensor);
// A fixed-width table: name, global shape, split, local shape. `max_layers` limits the
// layers printed (layer 0 .. max_layers-1; the others follow the same rule).
std::string ShardingTableToString(const std::vector<TensorSharding>& table, int max_layers = 1);

// FSDP: the flat buffer of `total` floats padded up to a multiple of `fsdp`, and the
// contiguous range fsdp rank `f` owns within it (size padded / fsdp; its end may lie in
// the padding past `total`).
int64_t FsdpPaddedSize(int64_t total, int fsdp);
IndexRange FsdpShardRange(int64_t total, int f, int fsdp);

// The batch a step processes (rows of max_target_length tokens).
struct PlanBatch {
  int64_t global_batch = 1;  // rows per optimizer step, over the whole world
  int64_t micro_batch = 1;   // per_device_batch_size: rows per forward/backward
  int64_t seq_len = 1;       // T
  bool remat_full = false;
};

// Bytes that one collective kind moves per rank per optimizer step.
struct CollectiveVolume {
  MeshAxis axis = MeshAxis::kData;
  std::string op;             // "allreduce" / "allgather" / "reduce-scatter"
  std::string what;           // "activations (2 fwd + 2 bwd per layer)", ...
  int64_t calls = 0;          // per step
  int64_t payload_bytes = 0;  // per call: the full (gathered / reduced) buffer
  int64_t sent_bytes = 0;     // per step: what a rank sends with ring algorithms
};

// Per-rank figures of one mesh; every rank of a mesh has the same (up to padding).
struct RankPlan {
  ModelConfig local;              // the tensor-local model
  int64_t params_tp_local = 0;    // N_tp_local: replicated + sharded / tensor
  int64_t params_per_rank = 0;    // ceil(N_tp_local / fsdp)
  int64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;
  int64_t total_bytes() const { return param_bytes + grad_bytes + optimizer_bytes + activation_bytes; }
  int64_t batch_rows_per_rank = 0;   // ceil(global_batch / batch_shards): rows of the rank's tensor group
  int64_t micro_batches = 0;         // ceil(batch_rows_per_rank / micro_batch)
  double model_flops_per_rank = 0;   // TrainingFlopsPerToken(m) * global_batch * T / world
  double rank_flops = 0;             // what the rank computes: local model (head replicated) + remat
  std::vector<CollectiveVolume> collectives;
};
RankPlan PlanRank(const Mesh& mesh, const ModelConfig& m, const PlanBatch& batch);

}  // namespace elastrain
