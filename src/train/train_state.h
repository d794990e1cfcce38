// The training state of one rank and how ranks keep it consistent.
//
// Every rank holds the tensor-LOCAL model (heads and MLP rows divided by the tensor
// degree; plan/sharding.h). Its flat buffer is cut into units: everything before layer
// 0, each layer, everything after the last layer (Transformer::UnitHooks). With FSDP
// (fsdp > 1, ZeRO-3) each fsdp rank owns a 1/fsdp chunk of every unit: the master
// parameters, the reduced gradient and both AdamW moments of its chunks only. The
// working parameters and gradients are full-size address ranges (mmap), but a layer's
// pages exist only while the model uses it: acquire = allgather the unit's chunks,
// release = drop its pages; a unit's gradient is reduce-scattered into the owner's
// chunk as soon as its backward finishes and its pages dropped.
// With fsdp = 1 the shard is the whole buffer, nothing is released, and gradients are
// reduced once per step with a bucketed allreduce over the data axis.
// A step: ZeroGrads -> forward/backward (hooks) -> ReduceGradients (allreduce of the
// shard over data) -> ClipGradients (global norm) -> Update (AdamW on the shard).
#pragma once

#include <cstdint>
#include <vector>

#include "plan/mesh.h"
#include "comm/process_group.h"
#include "plan/sharding.h"
#include "common/memory.h"
#include "model/layout.h"
#include "model/model_config.h"
#include "transformer/transformer.h"
#include "optim/optim.h"

namespace elastrain {

// The groups of one rank (any may have size 1). Not owned.
struct RankGroups {
  ProcessGroup* world = nullptr;
  ProcessGroup* tensor = nullptr;
  ProcessGroup* fsdp = nullptr;
  ProcessGroup* data = nullptr;
};

// Anonymous memory whose pages can be handed back to the kernel (they read as zeros).
// A buffer that is not populated at once is released in 2 MiB blocks (kReleaseBlockBytes,
// aligned, asked for as transparent huge pages with MADV_HUGEPAGE): mapping a block again
// is one page-table entry instead of 512. On a 2-core VM, FSDP's `small` at fsdp=4 ran
// 1.25 s a step with 4 KiB pages and 0.35 s with huge pages, as fast as never releasing;
// a released range keeps its partial blocks at either end (zeroed), at most 4 MiB.
inline constexpr size_t kReleaseBlockBytes = size_t{2} << 20;
class ReleasableBuffer {
 public:
  // populate: map every page now (a buffer that is used whole); else on first touch.
  explicit ReleasableBuffer(int64_t floats = 0, bool populate = false);
  ~ReleasableBuffer();
  ReleasableBuffer(const ReleasableBuffer&) = delete;
  ReleasableBuffer& operator=(const ReleasableBuffer&) = delete;
  float* data() { return data_; }
  const float* data() const { return data_; }
  // Sets [begin, begin+n) to zero, returning the whole blocks inside it to the kernel.
  void ZeroAndRelease(int64_t begin, int64_t n);
  // Maps the pages of [begin, begin+n) writable now, in one call (Linux >= 5.14; a no-op
  // before), rather than one fault per page as they are touched: a page first read maps
  // the shared zero page and its first write then faults again and flushes every core's
  // TLB. Released pages still read as zeros.
  void Populate(int64_t begin, int64_t n);

 private:
  float* data_ = nullptr;
  size_t bytes_ = 0;
  void* map_ = nullptr;  // the mapping, from before data_ when data_ was aligned in it
  size_t map_bytes_ = 0;
  size_t block_ = 0;     // what ZeroAndRelease hands back whole: a page, or kReleaseBlockBytes
};

// One FSDP unit of a tensor-local flat buffer (everything before layer 0, a layer,
// everything after the last layer) and what one fsdp rank owns of it.
struct FsdpUnit {
  int64_t begin = 0, end = 0;  // range of the local flat buffer
  int64_t chunk = 0;           // ceil((end-begin) / fsdp): what each fsdp rank owns
  int64_t shard_offset = 0;    // where this rank's chunk sits in the shard buffers
  int64_t own_begin = 0, own_end = 0;  // the owned range (own_end <= end: padding is not stored)
};
// The units of `local` as fsdp rank `f` of `fsdp` holds them; *shard_size: the floats of
// its shard buffers (the sum of the chunks; with fsdp = 1 the whole buffer).
std::vector<FsdpUnit> FsdpUnits(const ParamLayout& local, int fsdp, int f, int64_t* shard_size);

// A run of consecutive elements of one tensor's tensor-local view that a rank owns, and
// where it sits in the rank's shard buffers (params, adam_m, adam_v).
struct OwnedRun {
  size_t tensor = 0;         // index into the local layout's tensors and the sharding table
  int64_t local_begin = 0;   // flat offset within the tensor's local (tensor-parallel) view
  int64_t n = 0;
  int64_t shard_offset = 0;
};
// Every run a rank with these units owns, tensor by tensor (fsdp = 1: whole tensors).
std::vector<OwnedRun> OwnedRunsOf(const ParamLayout& local, const std::vector<FsdpUnit>& units, int fsdp);

class TrainState {
 public:
  // `global` is the whole model; the state holds the tensor-local slice for `coords`.
  TrainState(const ModelConfig& global, const Mesh& mesh, MeshCoords coords, RankGroups groups);

  const ParamLayout& local_layout() const { return local_layout_; }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  int64_t local_size() const { return local_layout_.total; }
  // The FSDP hooks for the model (empty hooks when fsdp = 1).
  Transformer<float>::UnitHooks Hooks();

  // Initialises from init_weights_seed exactly as a single process would (the global
  // tensors are drawn, then this rank keeps its slices and chunks); zeroes the AdamW moments.
  void InitParams(uint64_t seed);
  // True when this state can move to `mesh` at `coords` unchanged: the same fsdp and
  // tensor degrees and coordinates, so every buffer keeps its meaning (a data-parallel
  // resize). The values stay; only the groups change.
  bool CanRebind(const Mesh& mesh, MeshCoords coords) const;
  // Moves to `mesh` and its groups (requires CanRebind: InvalidArgument otherwise).
  Status Rebind(const Mesh& mesh, MeshCoords coords, RankGroups groups);

  void ZeroGrads();
  Status ReduceGradients();
  // Global-norm clipping of the reduced shard; returns the norm before clipping. The
  // gradients are not rewritten: the next Update applies the clipping factor as it reads
  // them (one pass over the optimizer state instead of two).
  Result<double> ClipGradients(double threshold);
  void Update(int64_t step, double lr, const AdamWOptions& opt);
  // The whole model's parameters in the global layout (collective over the world).
  Result<std::vector<float>> GatherGlobalParams();

  // What this rank owns, for checkpoints and peer copies.
  using OwnedRun = elastrain::OwnedRun;
  std::vector<OwnedRun> OwnedRuns() const { return OwnedRunsOf(local_layout_, units_, mesh_.fsdp()); }
  const std::vector<TensorSharding>& sharding() const { return sharding_; }
  int tensor_rank() const { return coords_.tensor; }
  float* shard_params() { return sharded() ? param_shard_.data() : params_.data(); }
  float* adam_m() { return m_.data(); }
  float* adam_v() { return v_.data(); }
  int64_t shard_size() const { return shard_size_; }

 private:
  using Unit = FsdpUnit;
  Status Acquire(int u);
  Status Release(int u);
  Status GradsBegin(int u);
  Status GradsReady(int u);
  bool sharded() const { return mesh_.fsdp() > 1; }
  float* shard_grads() { return sharded() ? grad_shard_.data() : grads_.data(); }
  // Calls f(shard_index, local_index, n) for each run of this rank's owned elements
  // that lies inside [begin, end) of the local buffer.
  template <typename F>
  void ForOwned(int64_t begin, int64_t end, F&& f) const;
  void CopyLocalGlobal(float* local, int t, float* global, bool to_global) const;

  ModelConfig global_, local_;
  ParamLayout global_layout_, local_layout_;
  std::vector<TensorSharding> sharding_;
  Mesh mesh_;
  MeshCoords coords_;
  RankGroups g_;
  std::vector<Unit> units_;
  int64_t shard_size_ = 0;
  ReleasableBuffer params_, grads_;                // local_size floats of address space
  FloatBuffer param_shard_, grad_shard_;           // FSDP: this rank's chunks
  FloatBuffer m_, v_;                              // AdamW moments of the shard
  FloatBuffer unit_buf_, chunk_buf_;               // padded unit / one chunk, for collectives
  // The weights of the global gradient norm, as runs of the shard: 1 for tensor-split
  // tensors, 1/tensor for replicated ones (every tensor rank holds them); padding is in
  // no run.
  struct NormRun {
    int64_t begin, n;
    double weight;
  };
  std::vector<NormRun> norm_runs_;
  // The clipping factor ClipGradients found, applied (and reset to 1) by Update.
  float clip_scale_ = 1.f;
};

}  // namespace elastrain
