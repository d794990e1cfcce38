// The device mesh: the world's ranks arranged as data x fsdp x tensor (MaxText's
// ici_data_parallelism, ici_fsdp_parallelism, ici_tensor_parallelism), and the groups of
// ranks that talk along each axis. Pure data, no communication; the process groups are
// built from the rank lists here. See docs/parallelism.md.
//
// Rank order: tensor fastest, then fsdp, then data:
//   rank = (d * fsdp + f) * tensor + t
// so the ranks of a tensor group (the chattiest: collectives inside every layer) are
// neighbours, which on a multi-host world puts them on one host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"

namespace elastrain {

enum class MeshAxis { kData, kFsdp, kTensor };
const char* MeshAxisName(MeshAxis a);    // "data" / "fsdp" / "tensor"
const char* MeshAxisConfigKey(MeshAxis a);  // "ici_data_parallelism" / ...

// The ranks that take part in one kind of collective with a given rank.
enum class MeshGroup {
  kTensor,    // same (d, f): split each layer's heads and MLP (activation allreduces)
  kFsdp,      // same (d, t): each holds 1/fsdp of the state (allgather / reduce-scatter)
  kData,      // same (f, t): full replicas of the fsdp shard (gradient allreduce)
  kGradient,  // same t (data x fsdp): every rank that holds a different share of the batch
};
const char* MeshGroupName(MeshGroup g);  // "tensor" / "fsdp" / "data" / "gradient"

struct MeshCoords {
  int data = 0, fsdp = 0, tensor = 0;
  bool operator==(const MeshCoords&) const = default;
};

class Mesh {
 public:
  // Each axis >= 1 (CHECKed: ResolveMesh is the way from user input to a Mesh).
  Mesh(int data, int fsdp, int tensor);

  int data() const { return data_; }
  int fsdp() const { return fsdp_; }
  int tensor() const { return tensor_; }
  int size(MeshAxis a) const;
  int world_size() const { return data_ * fsdp_ * tensor_; }
  // Ranks that see different rows of the batch: data x fsdp. Tensor peers share rows.
  int batch_shards() const { return data_ * fsdp_; }

  // Rank <-> coordinates; rank in [0, world_size), coordinates in range (CHECKed).
  MeshCoords Coords(int rank) const;
  int Rank(const MeshCoords& c) const;
  // Member ranks of `rank`'s group of that kind, sorted ascending; includes `rank`.
  std::vector<int> Group(MeshGroup kind, int rank) const;
  // The index of `rank` inside its group of that kind (its position in Group()).
  int GroupRank(MeshGroup kind, int rank) const;

  // "data=1 x fsdp=8 x tensor=4 = 32 ranks (rank = (d*8 + f)*4 + t)"
  std::string ToString() const;
  // ToString(), how the axes were chosen, and one line per (d, f) (the first 64):
  // "d=0 f=3: ranks 12 13 14 15" (the tensor groups).
  std::string LayoutTable() const;

  // How the axes were chosen: "explicit", "filled ici_fsdp_parallelism=-1", or the
  // automatic rule's reasoning. For printing only.
  std::string origin = "explicit";

 private:
  int data_, fsdp_, tensor_;
};

// What the automatic strategy (all three ici_* unset) needs to know.
struct AutoMeshBudget {
  int64_t memory_bytes_per_worker = 0;  // e.g. AvailableMemoryBytes() / num_workers
  int64_t batch_rows = 1;               // per_device_batch_size (one micro-batch)
  int64_t seq_len = 1;                  // max_target_length
  bool remat_full = false;              // remat_policy=full
};
// Share of a worker's memory budget that the replicated training state may use before
// the automatic strategy switches from data parallelism to FSDP (the rest is headroom
// for buffers the estimate does not count: collectives, the allocator, the OS).
inline constexpr double kAutoMeshMemoryFraction = 0.8;

// The mesh for `world_size` ranks from the ici_* values as configured:
//   > 0  the axis size;  0  not given;  -1  whatever is left (world / product of the rest).
// If at least one axis is given, the ungiven ones are 1. If none is given, the automatic
// rule: tensor = 1; data = world (pure data parallelism: one gradient allreduce per
// step, the fewest and largest collectives) when the replicated state -- parameters,
// gradients, AdamW m and v and one micro-batch of activations (EstimateTrainingMemory) --
// fits in kAutoMeshMemoryFraction of budget.memory_bytes_per_worker; else fsdp = world
// (pure FSDP: the state is divided by the world size).
// Errors (InvalidArgument, one line naming the keys and values): two -1s, a negative value
// other than -1, a -1 that does not divide evenly, a product != world_size, a tensor
// degree that does not divide base_num_query_heads, base_num_kv_heads and base_mlp_dim.
Result<Mesh> ResolveMesh(int world_size, int64_t ici_data, int64_t ici_fsdp, int64_t ici_tensor,
                         const ModelConfig& m, const AutoMeshBudget& budget);

// The tensor-parallel constraint alone: OK when `tensor` divides the query heads, the kv
// heads and the MLP width of `m`; `how` prefixes the message ("ici_tensor_parallelism=3").
Status CheckTensorDivides(const ModelConfig& m, int64_t tensor, const std::string& how);

}  // namespace elastrain
