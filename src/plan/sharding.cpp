#include "plan/sharding.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "common/log.h"
#include "model/flops.h"
#include "model/activations.h"

namespace elastrain {

namespace {

[[noreturn]] void BrokenInvariant(const std::string& what) {
  LOG_ERROR("Sharding: broken precondition: {}", what);
  std::abort();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + ")";
}

// "layers.12.attn.wq" -> 12; -1 for tensors outside the layers.
int64_t LayerIndex(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return -1;
  return std::strtoll(name.c_str() + 7, nullptr, 10);
}

}  // namespace

const char* TensorSplitName(TensorSplit s) {
  switch (s) {
    case TensorSplit::kReplicated: return "replicated";
    case TensorSplit::kColumn: return "column (dim 0)";
    case TensorSplit::kRow: return "row (dim 1)";
  }
  return "?";
}

TensorSplit TensorSplitFor(const std::string& name) {
  // Column-parallel: the outputs of these are per head / per MLP row, so a rank computes
  // its heads' q, k, v and its rows of the MLP hidden layer without communicating.
  static constexpr std::string_view kColumn[] = {".attn.wq", ".attn.wk", ".attn.wv", ".attn.bq",  ".attn.bk",
                                                 ".attn.bv", ".mlp.w_gate", ".mlp.w_up", ".mlp.b_up",
                                                 ".attn.q_norm_all.w", ".attn.k_norm_all.w"};
  // Row-parallel: they read those per-rank features; their partial outputs are summed
  // by one allreduce (the bias after it, so bo and b_down stay replicated).
  static constexpr std::string_view kRow[] = {".attn.wo", ".mlp.w_down"};
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (name.rfind("layers.", 0) != 0) return TensorSplit::kReplicated;
  for (std::string_view s : kColumn)
    if (ends_with(s)) return TensorSplit::kColumn;
  for (std::string_view s : kRow)
    if (ends_with(s)) return TensorSplit::kRow;
  return TensorSplit::kReplicated;
}

IndexRange TensorSharding::GlobalSlice(int t) const {
  if (t < 0 || t >= tensor) BrokenInvariant(fmt::format("{}: tensor rank {} of {}", name, t, tensor));
  if (split_dim < 0) return {0, global_shape.empty() ? 1 : global_shape[0]};
  const int64_t n = local_shape[split_dim];
  return {t * n, (t + 1) * n};
}

Result<ModelConfig> TensorLocalConfig(const ModelConfig& m, int tensor) {
  if (tensor < 1)
    return Status::InvalidArgument(fmt::format("ici_tensor_parallelism={}: expected a positive integer", tensor));
  ELASTRAIN_RETURN_IF_ERROR(CheckTensorDivides(m, tensor, fmt::format("ici_tensor_parallelism={}", tensor)));
  ModelConfig local = m;
  local.num_heads = m.num_heads / tensor;
  local.num_kv_heads = m.num_kv_heads / tensor;
  local.mlp_dim = m.mlp_dim / tensor;
  return local;
}

std::vector<TensorSharding> ShardingTable(const ModelConfig& m, int tensor) {
  auto local = TensorLocalConfig(m, tensor);
  if (!local.ok()) BrokenInvariant(local.status().message());
  const ParamLayout g = BuildParamLayout(m), l = BuildParamLayout(local.value());
  if (g.tensors.size() != l.tensors.size()) BrokenInvariant("local and global layouts differ in tensors");
  std::vector<TensorSharding> out;
  out.reserve(g.tensors.size());
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    TensorSharding s;
    s.name = g.tensors[i].name;
    s.global_shape = g.tensors[i].shape;
    s.local_shape = l.tensors[i].shape;
    s.split = TensorSplitFor(s.name);
    s.split_dim = s.split == TensorSplit::kColumn ? 0 : s.split == TensorSplit::kRow ? 1 : -1;
    s.tensor = tensor;
    // The rule and the local layout must agree: only split_dim shrinks, by exactly `tensor`.
    bool consistent = l.tensors[i].name == s.name && s.local_shape.size() == s.global_shape.size() &&
                      s.split_dim < static_cast<int>(s.global_shape.size());
    for (size_t d = 0; consistent && d < s.global_shape.size(); ++d) {
      const int64_t want = static_cast<int>(d) == s.split_dim ? s.global_shape[d] / tensor : s.global_shape[d];
      consistent = s.local_shape[d] == want;
    }
    if (!consistent)
      BrokenInvariant(fmt::format("{}: rule {} does not match local shape {} of global {}", s.name,
                                  TensorSplitName(s.split), ShapeText(s.local_shape), ShapeText(s.global_shape)));
    out.push_back(std::move(s));
  }
  return out;
}

std::string ShardingTableToString(const std::vector<TensorSharding>& table, int max_layers) {
  std::string out = fmt::format("  {:<24} {:<18} {:<16} {:<16} {}\n", "tensor", "global shape", "split",
                                "local shape", "tensor rank t holds");
  int64_t last_layer = -1;
  for (const TensorSharding& s : table) {
    const int64_t layer = LayerIndex(s.name);
    last_layer = std::max(last_layer, layer);
    if (layer >= max_layers) continue;
    std::string holds = "all";
    if (s.split_dim >= 0) {
      const int64_t n = s.local_shape[s.split_dim];
      holds = fmt::format("dim {} [{}t, {}(t+1))", s.split_dim, n, n);
    }
    out += fmt::format("  {:<24} {:<18} {:<16} {:<16} {}\n", s.name, ShapeText(s.global_shape),
                       TensorSplitName(s.split), ShapeText(s.local_shape), holds);
  }
  if (last_layer >= max_layers)
    out += fmt::format("  (layers {}..{} follow the same rules)\n", max_layers, last_layer);
  return out;
}

int64_t FsdpPaddedSize(int64_t total, int fsdp) {
  if (fsdp < 1 || total < 0) BrokenInvariant(fmt::format("FsdpPaddedSize({}, {})", total, fsdp));
  return CeilDiv(total, fsdp) * fsdp;
}

IndexRange FsdpShardRange(int64_t total, int f, int fsdp) {
  if (f < 0 || f >= fsdp) BrokenInvariant(fmt::format("fsdp rank {} of {}", f, fsdp));
  const int64_t shard = FsdpPaddedSize(total, fsdp) / fsdp;
  return {f * shard, (f + 1) * shard};
}

RankPlan PlanRank(const Mesh& mesh, const ModelConfig& m, const PlanBatch& batch) {
  RankPlan p;
  auto local = TensorLocalConfig(m, mesh.tensor());
  if (!local.ok()) BrokenInvariant(local.status().message());
  p.local = local.value();
  const int64_t T = batch.seq_len;
  const RematPolicy remat = batch.remat_full ? RematPolicy::kFull : RematPolicy::kNone;

  // --- memory: the fsdp shard of the tensor-local state, and one micro-batch of activations
  p.params_tp_local = p.local.NumParams();
  p.params_per_rank = FsdpPaddedSize(p.params_tp_local, mesh.fsdp()) / mesh.fsdp();
  p.param_bytes = 4 * p.params_per_rank;
  p.grad_bytes = 4 * p.params_per_rank;
  p.optimizer_bytes = 8 * p.params_per_rank;
  p.activation_bytes = 4 * ActivationFloats(p.local, batch.micro_batch, T, remat);

  // --- batch and FLOPs: tensor peers process the same rows
  p.batch_rows_per_rank = CeilDiv(batch.global_batch, mesh.batch_shards());
  p.micro_batches = CeilDiv(p.batch_rows_per_rank, batch.micro_batch);
  p.model_flops_per_rank = TrainingFlopsPerToken(m, T) * static_cast<double>(batch.global_batch * T) /
                           static_cast<double>(mesh.world_size());
  // The local model's FLOPs count the replicated head in full (every tensor rank computes
  // the whole logits); remat=full adds one more forward of the layers (not the head).
  double per_token = TrainingFlopsPerToken(p.local, T);
  if (batch.remat_full) {
    const double head = static_cast<double>(p.local.vocab_size * p.local.emb_dim);
    per_token += 2.0 * (static_cast<double>(MatmulParams(p.local)) - head) +
                 4.0 * static_cast<double>(p.local.num_layers * T * p.local.num_heads * p.local.head_dim);
  }
  p.rank_flops = per_token * static_cast<double>(p.batch_rows_per_rank * T);

  // --- collectives per step (ring algorithms: allreduce sends 2(n-1)/n of the buffer,
  // allgather and reduce-scatter (n-1)/n of the full buffer)
  auto ring = [](int64_t payload, int n, int factor) {
    return static_cast<int64_t>(static_cast<double>(payload) * factor * (n - 1) / n);
  };
  if (mesh.tensor() > 1) {
    const int n = mesh.tensor();
    CollectiveVolume v{MeshAxis::kTensor, "allreduce", "activations (B,T,C) after wo and w_down, fwd + bwd", 0, 0, 0};
    const int64_t per_layer = batch.remat_full ? 6 : 4;  // 2 fwd + 2 bwd (+ 2 recomputed fwd)
    v.calls = per_layer * m.num_layers * p.micro_batches;
    v.payload_bytes = 4 * batch.micro_batch * T * m.emb_dim;
    v.sent_bytes = v.calls * ring(v.payload_bytes, n, 2);
    p.collectives.push_back(v);
    if (m.qk_norm && !m.qk_norm_global) {  // the replicated QK-norm scales see only a rank's heads
      CollectiveVolume q{MeshAxis::kTensor, "allreduce", "QK-norm scale gradients, once per layer in bwd", 0, 0, 0};
      q.calls = m.num_layers * p.micro_batches;
      q.payload_bytes = 4 * 2 * m.head_dim;
      q.sent_bytes = q.calls * ring(q.payload_bytes, n, 2);
      p.collectives.push_back(q);
    } else if (m.qk_norm) {  // the all-heads QK norm sums its row statistics over the heads' ranks
      CollectiveVolume q{MeshAxis::kTensor, "allreduce", "QK-norm row statistics (B,T,2), fwd + bwd", 0, 0, 0};
      q.calls = (batch.remat_full ? 3 : 2) * m.num_layers * p.micro_batches;
      q.payload_bytes = 4 * (2 * batch.micro_batch * T + 2);
      q.sent_bytes = q.calls * ring(q.payload_bytes, n, 2);
      p.collectives.push_back(q);
    }
  }
  if (mesh.fsdp() > 1) {
    const int n = mesh.fsdp();
    const int64_t full = 4 * FsdpPaddedSize(p.params_tp_local, n);
    CollectiveVolume g{MeshAxis::kFsdp, "allgather", "parameters, in forward and again in backward", 0, 0, 0};
    g.calls = 2 * p.micro_batches;
    g.payload_bytes = full;
    g.sent_bytes = g.calls * ring(full, n, 1);
    p.collectives.push_back(g);
    CollectiveVolume r{MeshAxis::kFsdp, "reduce-scatter", "gradients, once per micro-batch", 0, 0, 0};
    r.calls = p.micro_batches;
    r.payload_bytes = full;
    r.sent_bytes = r.calls * ring(full, n, 1);
    p.collectives.push_back(r);
  }
  if (mesh.data() > 1) {
    const int n = mesh.data();
    CollectiveVolume a{MeshAxis::kData, "allreduce", "gradient shard, once per step", 1, 0, 0};
    a.payload_bytes = p.grad_bytes;
    a.sent_bytes = ring(a.payload_bytes, n, 2);
    p.collectives.push_back(a);
  }
  return p;
}

}  // namespace elastrain
