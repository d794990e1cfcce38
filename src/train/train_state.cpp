#include "train/train_state.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "model/transformer.h"

namespace elastrain {

namespace {
// Bucket of the data-parallel gradient allreduce: 4 MiB of floats.
constexpr size_t kAllReduceBucketElems = size_t{1} << 20;
}  // namespace

TrainState::TrainState(const ModelConfig& global, const Mesh& mesh, MeshCoords coords, RankGroups groups)
    : global_(global), mesh_(mesh), coords_(coords), g_(groups) {
  auto local = TensorLocalConfig(global, mesh.tensor());
  local_ = local.ok() ? local.value() : global;  // ResolveMesh has validated divisibility
  global_layout_ = BuildParamLayout(global_);
  local_layout_ = BuildParamLayout(local_);
  sharding_ = ShardingTable(global_, mesh.tensor());
  padded_ = FsdpPaddedSize(local_layout_.total, mesh.fsdp());
  shard_ = FsdpShardRange(local_layout_.total, coords.fsdp, mesh.fsdp());
  params_.assign(padded_, 0.f);
  grads_.assign(padded_, 0.f);
  m_.assign(shard_.size(), 0.f);
  v_.assign(shard_.size(), 0.f);
  if (mesh.fsdp() > 1) shard_buf_.assign(shard_.size(), 0.f);
  norm_weight_.assign(shard_.size(), 0.f);
  for (size_t i = 0; i < local_layout_.tensors.size(); ++i) {
    const ParamTensor& t = local_layout_.tensors[i];
    const float w = sharding_[i].split == TensorSplit::kReplicated ? 1.f / static_cast<float>(mesh.tensor()) : 1.f;
    const int64_t b = std::max(t.offset, shard_.begin), e = std::min(t.offset + t.size, shard_.end);
    for (int64_t j = b; j < e; ++j) norm_weight_[j - shard_.begin] = w;
  }
}

void TrainState::LocalToGlobal(const float* local, int t, float* global) const {
  for (size_t i = 0; i < sharding_.size(); ++i) {
    const TensorSharding& s = sharding_[i];
    const ParamTensor& gt = global_layout_.tensors[i];
    const ParamTensor& lt = local_layout_.tensors[i];
    const float* src = local + lt.offset;
    float* dst = global + gt.offset;
    if (s.split == TensorSplit::kReplicated) {
      std::memcpy(dst, src, sizeof(float) * lt.size);
      continue;
    }
    const IndexRange r = s.GlobalSlice(t);
    const int64_t cols = gt.shape.size() > 1 ? gt.shape[1] : 1;
    if (s.split_dim == 0) {
      std::memcpy(dst + r.begin * cols, src, sizeof(float) * lt.size);
    } else {
      const int64_t rows = gt.shape[0], lcols = r.size();
      for (int64_t row = 0; row < rows; ++row)
        std::memcpy(dst + row * cols + r.begin, src + row * lcols, sizeof(float) * lcols);
    }
  }
}

void TrainState::GlobalToLocal(const float* global, int t, float* local) const {
  for (size_t i = 0; i < sharding_.size(); ++i) {
    const TensorSharding& s = sharding_[i];
    const ParamTensor& gt = global_layout_.tensors[i];
    const ParamTensor& lt = local_layout_.tensors[i];
    const float* src = global + gt.offset;
    float* dst = local + lt.offset;
    if (s.split == TensorSplit::kReplicated) {
      std::memcpy(dst, src, sizeof(float) * lt.size);
      continue;
    }
    const IndexRange r = s.GlobalSlice(t);
    const int64_t cols = gt.shape.size() > 1 ? gt.shape[1] : 1;
    if (s.split_dim == 0) {
      std::memcpy(dst, src + r.begin * cols, sizeof(float) * lt.size);
    } else {
      const int64_t rows = gt.shape[0], lcols = r.size();
      for (int64_t row = 0; row < rows; ++row)
        std::memcpy(dst + row * lcols, src + row * cols + r.begin, sizeof(float) * lcols);
    }
  }
}

void TrainState::InitParams(uint64_t seed) {
  if (mesh_.tensor() == 1) {
    elastrain::InitParams(global_, global_layout_, seed, params_.data());
    return;
  }
  std::vector<float> global(global_layout_.total);
  elastrain::InitParams(global_, global_layout_, seed, global.data());
  GlobalToLocal(global.data(), coords_.tensor, params_.data());
}

void TrainState::ZeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.f); }

float* TrainState::shard_grads() { return mesh_.fsdp() > 1 ? shard_buf_.data() : grads_.data(); }

Status TrainState::ReduceGradients() {
  if (mesh_.fsdp() > 1) {
    ELASTRAIN_RETURN_IF_ERROR(g_.fsdp->ReduceScatterSum(grads_.data(), shard_buf_.data(), shard_.size()));
  }
  if (mesh_.data() > 1)
    return g_.data->AllReduceSumBucketed(shard_grads(), shard_.size(), kAllReduceBucketElems);
  return Status::OK();
}

Result<double> TrainState::ClipGradients(double threshold) {
  const float* g = shard_grads();
  double sq = 0;
  for (int64_t i = 0; i < shard_.size(); ++i) sq += static_cast<double>(g[i]) * g[i] * norm_weight_[i];
  // Data replicas hold the same shard: the world sum counts each shard `data` times.
  sq /= mesh_.data();
  if (mesh_.world_size() > 1) ELASTRAIN_RETURN_IF_ERROR(g_.world->AllReduceSum(&sq, 1));
  const double norm = std::sqrt(sq);
  if (threshold > 0 && norm > threshold) {
    const float scale = static_cast<float>(threshold / (norm + 1e-6));
    float* gm = shard_grads();
    for (int64_t i = 0; i < shard_.size(); ++i) gm[i] *= scale;
  }
  return norm;
}

void TrainState::Update(int64_t step, double lr, const AdamWOptions& opt) {
  float* g = shard_grads();
  for (const ParamTensor& t : local_layout_.tensors) {
    const int64_t b = std::max(t.offset, shard_.begin), e = std::min(t.offset + t.size, shard_.end);
    if (b >= e) continue;
    const int64_t s = b - shard_.begin;
    AdamWUpdateSpan(params_.data() + b, g + s, m_.data() + s, v_.data() + s, e - b, step, lr, t.shape.size() >= 2,
                    opt);
  }
}

Status TrainState::GatherParams() {
  if (mesh_.fsdp() == 1) return Status::OK();
  std::memcpy(shard_buf_.data(), params_.data() + shard_.begin, sizeof(float) * shard_.size());
  return g_.fsdp->AllGather(shard_buf_.data(), shard_.size(), params_.data());
}

Result<std::vector<float>> TrainState::GatherGlobalParams() {
  std::vector<float> global(global_layout_.total);
  if (mesh_.tensor() == 1) {
    std::memcpy(global.data(), params_.data(), sizeof(float) * global.size());
    return global;
  }
  const size_t n = local_layout_.total;
  std::vector<float> all(n * mesh_.tensor());
  ELASTRAIN_RETURN_IF_ERROR(g_.tensor->AllGather(params_.data(), n, all.data()));
  for (int t = 0; t < mesh_.tensor(); ++t) LocalToGlobal(all.data() + t * n, t, global.data());
  return global;
}

}  // namespace elastrain
