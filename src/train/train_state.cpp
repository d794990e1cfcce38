#include "train/train_state.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

#include "common/log.h"

namespace elastrain {

namespace {
// Bucket of the data-parallel gradient allreduce: 4 MiB of floats.
constexpr size_t kAllReduceBucketElems = size_t{1} << 20;
}  // namespace

// ---------------------------------------------------------------- ReleasableBuffer
ReleasableBuffer::ReleasableBuffer(int64_t floats, bool populate)
    : bytes_(std::max<size_t>(1, floats * sizeof(float))) {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Released in blocks: room to align the start to one.
  block_ = populate ? page : kReleaseBlockBytes;
  map_bytes_ = bytes_ + (populate ? 0 : block_);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
  if (map_ == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(map_);
  data_ = reinterpret_cast<float*>((start + block_ - 1) / block_ * block_);
  // Huge pages where the kernel has them (THP "always" or "madvise"); else 4 KiB pages.
  if (!populate) ::madvise(map_, map_bytes_, MADV_HUGEPAGE);
}

ReleasableBuffer::~ReleasableBuffer() {
  if (map_) ::munmap(map_, map_bytes_);
}

void ReleasableBuffer::ZeroAndRelease(int64_t begin, int64_t n) {
  if (n <= 0) return;
  const uintptr_t block = block_;
  const uintptr_t b = reinterpret_cast<uintptr_t>(data_ + begin), e = reinterpret_cast<uintptr_t>(data_ + begin + n);
  const uintptr_t pb = (b + block - 1) / block * block, pe = e / block * block;
  if (pb >= pe) {
    std::memset(data_ + begin, 0, n * sizeof(float));
    return;
  }
  std::memset(reinterpret_cast<void*>(b), 0, pb - b);
  std::memset(reinterpret_cast<void*>(pe), 0, e - pe);
  ::madvise(reinterpret_cast<void*>(pb), pe - pb, MADV_DONTNEED);  // reads back as zeros
}

void ReleasableBuffer::Populate(int64_t begin, int64_t n) {
  if (n <= 0) return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(data_ + begin) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(data_ + begin + n) + page - 1) / page * page;
  // On failure (an older kernel: EINVAL) the pages fault in as they are touched.
  ::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
}

// ---------------------------------------------------------------- TrainState
TrainState::TrainState(const ModelConfig& global, const Mesh& mesh, MeshCoords coords, RankGroups groups)
    : global_(global),
      mesh_(mesh),
      coords_(coords),
      g_(groups),
      params_(0),
      grads_(0) {
  auto local = TensorLocalConfig(global, mesh.tensor());
  local_ = local.ok() ? local.value() : global;  // ResolveMesh has validated divisibility
  global_layout_ = BuildParamLayout(global_);
  local_layout_ = BuildParamLayout(local_);
  sharding_ = ShardingTable(global_, mesh.tensor());
  params_.~ReleasableBuffer();
  // Unsharded, both buffers are used whole every step: map them now. With FSDP a layer's
  // pages exist only while it is in use.
  const bool whole = mesh.fsdp() == 1;
  new (&params_) ReleasableBuffer(local_layout_.total, whole);
  grads_.~ReleasableBuffer();
  new (&grads_) ReleasableBuffer(local_layout_.total, whole);

  units_ = FsdpUnits(local_layout_, mesh.fsdp(), coords.fsdp, &shard_size_);
  int64_t max_padded = 0;
  for (const Unit& u : units_) max_padded = std::max(max_padded, u.chunk * mesh.fsdp());
  if (sharded()) {
    param_shard_.assign(shard_size_, 0.f);
    grad_shard_.assign(shard_size_, 0.f);
    unit_buf_.assign(max_padded, 0.f);
    chunk_buf_.assign(max_padded / mesh.fsdp(), 0.f);
  }
  m_.assign(shard_size_, 0.f);
  v_.assign(shard_size_, 0.f);
  norm_runs_.clear();
  for (size_t i = 0; i < local_layout_.tensors.size(); ++i) {
    const ParamTensor& t = local_layout_.tensors[i];
    const double w = sharding_[i].split == TensorSplit::kReplicated ? 1.0 / mesh.tensor() : 1.0;
    ForOwned(t.offset, t.offset + t.size, [&](int64_t s, int64_t, int64_t n) {
      if (!norm_runs_.empty() && norm_runs_.back().weight == w && norm_runs_.back().begin + norm_runs_.back().n == s)
        norm_runs_.back().n += n;
      else
        norm_runs_.push_back({s, n, w});
    });
  }
}

std::vector<FsdpUnit> FsdpUnits(const ParamLayout& local, int fsdp, int f, int64_t* shard_size) {
  // Units: before layer 0, each layer, after the last layer.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  ranges.push_back({0, local.layers.front().begin});
  for (const LayerOffsets& l : local.layers) ranges.push_back({l.begin, l.end});
  ranges.push_back({local.layers.back().end, local.total});
  const int64_t F = fsdp;
  std::vector<FsdpUnit> units;
  int64_t size = 0;
  for (auto [b, e] : ranges) {
    FsdpUnit u;
    u.begin = b;
    u.end = e;
    u.chunk = (e - b + F - 1) / F;
    u.shard_offset = size;
    u.own_begin = std::min(e, b + f * u.chunk);
    u.own_end = std::min(e, u.own_begin + u.chunk);
    size += u.chunk;
    units.push_back(u);
  }
  *shard_size = fsdp > 1 ? size : local.total;  // unsharded: the whole buffer, in order
  return units;
}

namespace {
// Calls f(shard_index, local_index, n) for each run of the owned elements in [begin, end).
template <typename F>
void ForOwnedIn(const std::vector<FsdpUnit>& units, int fsdp, int64_t begin, int64_t end, F&& f) {
  if (fsdp <= 1) {
    if (begin < end) f(begin, begin, end - begin);
    return;
  }
  for (const FsdpUnit& u : units) {
    const int64_t b = std::max(begin, u.own_begin), e = std::min(end, u.own_end);
    if (b < e) f(u.shard_offset + (b - u.own_begin), b, e - b);
  }
}
}  // namespace

std::vector<OwnedRun> OwnedRunsOf(const ParamLayout& local, const std::vector<FsdpUnit>& units, int fsdp) {
  std::vector<OwnedRun> runs;
  for (size_t i = 0; i < local.tensors.size(); ++i) {
    const ParamTensor& t = local.tensors[i];
    ForOwnedIn(units, fsdp, t.offset, t.offset + t.size, [&](int64_t s, int64_t l, int64_t n) {
      runs.push_back({i, l - t.offset, n, s});
    });
  }
  return runs;
}

template <typename F>
void TrainState::ForOwned(int64_t begin, int64_t end, F&& f) const {
  ForOwnedIn(units_, mesh_.fsdp(), begin, end, std::forward<F>(f));
}

Transformer<float>::UnitHooks TrainState::Hooks() {
  if (!sharded()) return {};
  return {[this](int u) { return Acquire(u); }, [this](int u) { return Release(u); },
          [this](int u) { return GradsBegin(u); }, [this](int u) { return GradsReady(u); }};
}

Status TrainState::Acquire(int ui) {
  const Unit& u = units_[ui];
  const int64_t n = u.end - u.begin;
  params_.Populate(u.begin, n);
  std::memcpy(chunk_buf_.data(), param_shard_.data() + u.shard_offset, sizeof(float) * u.chunk);
  if (n == u.chunk * mesh_.fsdp())  // no padding: gather straight into place
    return g_.fsdp->AllGather(chunk_buf_.data(), u.chunk, params_.data() + u.begin);
  ELASTRAIN_RETURN_IF_ERROR(g_.fsdp->AllGather(chunk_buf_.data(), u.chunk, unit_buf_.data()));
  std::memcpy(params_.data() + u.begin, unit_buf_.data(), sizeof(float) * n);
  return Status::OK();
}

Status TrainState::Release(int ui) {
  const Unit& u = units_[ui];
  params_.ZeroAndRelease(u.begin, u.end - u.begin);
  return Status::OK();
}

Status TrainState::GradsBegin(int ui) {
  grads_.Populate(units_[ui].begin, units_[ui].end - units_[ui].begin);
  return Status::OK();
}

Status TrainState::GradsReady(int ui) {
  const Unit& u = units_[ui];
  const int64_t n = u.end - u.begin;
  const float* in = grads_.data() + u.begin;
  if (n != u.chunk * mesh_.fsdp()) {  // pad the unit to fsdp equal chunks
    std::memcpy(unit_buf_.data(), in, sizeof(float) * n);
    std::fill(unit_buf_.begin() + n, unit_buf_.begin() + u.chunk * mesh_.fsdp(), 0.f);
    in = unit_buf_.data();
  }
  ELASTRAIN_RETURN_IF_ERROR(g_.fsdp->ReduceScatterSum(in, chunk_buf_.data(), u.chunk));
  float* acc = grad_shard_.data() + u.shard_offset;
  for (int64_t i = 0; i < u.chunk; ++i) acc[i] += chunk_buf_[i];
  grads_.ZeroAndRelease(u.begin, n);  // ready for the next micro-batch, and no pages held
  return Status::OK();
}

// Copies between a tensor-local flat buffer and the global one for tensor rank t, in
// the direction `to_global`: whole replicated tensors, row blocks of dim-0 splits, and
// per-row column blocks of dim-1 splits.
void TrainState::CopyLocalGlobal(float* local, int t, float* global, bool to_global) const {
  auto copy = [to_global](float* l, float* g, int64_t n) {
    if (to_global) std::memcpy(g, l, sizeof(float) * n);
    else std::memcpy(l, g, sizeof(float) * n);
  };
  for (size_t i = 0; i < sharding_.size(); ++i) {
    const TensorSharding& s = sharding_[i];
    const ParamTensor& gt = global_layout_.tensors[i];
    const ParamTensor& lt = local_layout_.tensors[i];
    float* l = local + lt.offset;
    float* g = global + gt.offset;
    if (s.split == TensorSplit::kReplicated) {
      copy(l, g, lt.size);
      continue;
    }
    const IndexRange r = s.GlobalSlice(t);
    const int64_t cols = gt.shape.size() > 1 ? gt.shape[1] : 1;
    if (s.split_dim == 0) {
      copy(l, g + r.begin * cols, lt.size);
    } else {
      for (int64_t row = 0; row < gt.shape[0]; ++row) copy(l + row * r.size(), g + row * cols + r.begin, r.size());
    }
  }
}

bool TrainState::CanRebind(const Mesh& mesh, MeshCoords coords) const {
  return mesh.fsdp() == mesh_.fsdp() && mesh.tensor() == mesh_.tensor() && coords.fsdp == coords_.fsdp &&
         coords.tensor == coords_.tensor;
}

Status TrainState::Rebind(const Mesh& mesh, MeshCoords coords, RankGroups groups) {
  if (!CanRebind(mesh, coords))
    return Status::InvalidArgument("train state of mesh " + mesh_.ToString() + " cannot move to mesh " +
                                   mesh.ToString() + " (its fsdp or tensor layout differs)");
  mesh_ = mesh;
  coords_ = coords;
  g_ = groups;
  // With FSDP the working buffers are all zeros between steps (ZeroGrads relies on it),
  // but a generation that failed in the middle of a backward left the gradients of the
  // units it had not yet reduced, and gathered parameters: the next step would add to them.
  if (sharded()) {
    grads_.ZeroAndRelease(0, local_layout_.total);
    params_.ZeroAndRelease(0, local_layout_.total);
  }
  return Status::OK();
}

void TrainState::InitParams(uint64_t seed) {
  std::fill(m_.begin(), m_.end(), 0.f);
  std::fill(v_.begin(), v_.end(), 0.f);
  if (mesh_.tensor() == 1) {
    elastrain::InitParams(global_, global_layout_, seed, params_.data());
  } else {
    std::vector<float> global(global_layout_.total);
    elastrain::InitParams(global_, global_layout_, seed, global.data());
    CopyLocalGlobal(params_.data(), coords_.tensor, global.data(), /*to_global=*/false);
  }
  if (!sharded()) return;
  ForOwned(0, local_layout_.total, [&](int64_t s, int64_t l, int64_t n) {
    std::memcpy(param_shard_.data() + s, params_.data() + l, sizeof(float) * n);
  });
  params_.ZeroAndRelease(0, local_layout_.total);
}

void TrainState::ZeroGrads() {
  // The working grads of FSDP are zero already; only the shard needs zeroing.
  if (sharded()) elastrain::ZeroGrads(grad_shard_.data(), static_cast<int64_t>(grad_shard_.size()));
  else elastrain::ZeroGrads(grads_.data(), local_layout_.total);
}

Status TrainState::ReduceGradients() {
  if (mesh_.data() == 1) return Status::OK();
  return g_.data->AllReduceSumBucketed(shard_grads(), shard_size_, kAllReduceBucketElems);
}

Result<double> TrainState::ClipGradients(double threshold) {
  const float* g = shard_grads();
  double sq = 0;
  for (const NormRun& r : norm_runs_) sq += r.weight * SumOfSquares(g + r.begin, r.n);
  // Data replicas hold the same shard: the world sum counts each shard `data` times.
  sq /= mesh_.data();
  if (mesh_.world_size() > 1) ELASTRAIN_RETURN_IF_ERROR(g_.world->AllReduceSum(&sq, 1));
  const double norm = std::sqrt(sq);
  clip_scale_ = ClipScale(norm, threshold);  // applied inside the update's pass over the state
  return norm;
}

void TrainState::Update(int64_t step, double lr, const AdamWOptions& opt) {
  float* p = shard_params();
  float* g = shard_grads();
  for (const ParamTensor& t : local_layout_.tensors) {
    const bool decay = t.shape.size() >= 2;
    ForOwned(t.offset, t.offset + t.size, [&](int64_t s, int64_t, int64_t n) {
      AdamWUpdateSpan(p + s, g + s, m_.data() + s, v_.data() + s, n, step, lr, decay, opt, clip_scale_);
    });
  }
  clip_scale_ = 1.f;
}

Result<std::vector<float>> TrainState::GatherGlobalParams() {
  if (sharded())
    for (size_t u = 0; u < units_.size(); ++u) ELASTRAIN_RETURN_IF_ERROR(Acquire(static_cast<int>(u)));
  std::vector<float> global(global_layout_.total);
  if (mesh_.tensor() == 1) {
    std::memcpy(global.data(), params_.data(), sizeof(float) * global.size());
  } else {
    const size_t n = local_layout_.total;
    std::vector<float> all(n * mesh_.tensor());
    ELASTRAIN_RETURN_IF_ERROR(g_.tensor->AllGather(params_.data(), n, all.data()));
    for (int t = 0; t < mesh_.tensor(); ++t) CopyLocalGlobal(all.data() + t * n, t, global.data(), /*to_global=*/true);
  }
  if (sharded())
    for (size_t u = 0; u < units_.size(); ++u) ELASTRAIN_RETURN_IF_ERROR(Release(static_cast<int>(u)));
  return global;
}

}  // namespace elastrain

namespace elastrain {


}  // namespace elastrain
