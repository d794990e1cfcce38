#include "transformer/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "kernels/ops.h"

namespace elastrain {

namespace k = kernels;

namespace {
using Dims = ActivationDims;
Dims MakeDims(const ModelConfig& m, int64_t B, int64_t T) { return MakeActivationDims(m, B, T); }
}  // namespace

template <typename T>
Transformer<T>::Transformer(const ModelConfig& cfg, int64_t max_batch, int64_t seq_len, RematPolicy remat)
    : cfg_(cfg), layout_(BuildParamLayout(cfg)), max_batch_(max_batch), seq_len_(seq_len), remat_(remat) {
  acts_.assign(elastrain::ActivationFloats(cfg, max_batch, seq_len, remat), T(0));
  CarveActivations(acts_.data(), MakeDims(cfg, max_batch, seq_len), cfg.num_layers, remat, &av_);
  if (cfg.family == ModelFamily::kLlama) {
    rope_.resize(seq_len * cfg.head_dim);
    k::rope_table(rope_.data(), seq_len, cfg.head_dim, cfg.rope_theta, cfg.rope_scaling == RopeScaling::kLlama31);
  }
  if (cfg.qk_norm) qk_norm_grad_.resize(2 * cfg.head_dim);
  if (cfg.qk_norm_global) qk_stats_.resize(2 * max_batch * seq_len + 2);
}

template <typename T>
kernels::AttentionOptions Transformer<T>::AttentionFor(int64_t l) const {
  kernels::AttentionOptions o;
  const bool local = cfg_.attention_layout == AttentionLayout::kAllLocal ||
                     (cfg_.attention_layout == AttentionLayout::kAlternating && l % 2 == 0) ||
                     (cfg_.attention_layout == AttentionLayout::kOlmo3 && l % 4 != 3);
  o.window = local ? cfg_.sliding_window : 0;
  o.soft_cap = cfg_.attn_logits_soft_cap;
  return o;
}

template <typename T>
Transformer<T>::~Transformer() = default;

template <typename T>
typename Transformer<T>::LayerActs& Transformer<T>::ActsFor(int64_t l) {
  return *av_.layers[remat_ == RematPolicy::kFull ? 0 : l];
}

template <typename T>
void Transformer<T>::LayerForward(int64_t l, const T* w, LayerActs& a, const T* x_in, T* x_out, const Span& s) {
  const Dims d = MakeDims(cfg_, s.rows, s.len);
  const LayerOffsets& o = layout_.layers[l];
  const bool llama = cfg_.family == ModelFamily::kLlama;
  const int64_t N = d.N, C = d.C;
  auto bias = [&](int64_t off) { return off >= 0 ? w + off : nullptr; };
  // attention block: x_mid = x_in + wo(attention(norm1(x_in))) (olmo3: no norm1)
  if (cfg_.pre_norm && llama) k::rmsnorm_forward(a.norm1, a.rstd1, x_in, w + o.attn_norm_w, N, C, cfg_.norm_eps);
  else if (cfg_.pre_norm) k::layernorm_forward(a.norm1, a.mean1, a.rstd1, x_in, w + o.attn_norm_w, w + o.attn_norm_b, N, C, cfg_.norm_eps);
  const T* attn_in = cfg_.pre_norm ? a.norm1 : x_in;
  k::matmul_forward(a.qkv, attn_in, w + o.wq, bias(o.bq), N, C, d.S);
  // QK norm before RoPE, as qwen3 and olmo3 (and MaxText's use_qk_norm) apply it.
  const int64_t Hq = cfg_.num_heads, Hkv = cfg_.num_kv_heads, hd = cfg_.head_dim;
  if (cfg_.qk_norm && cfg_.qk_norm_global) {
    // The row statistics cover every head: summed over the tensor ranks, with the
    // feature counts appended so that the sum also gives the whole model's counts.
    T* ss = qk_stats_.data();
    k::qk_global_sumsq(ss, a.qkv, N, Hq, Hkv, hd);
    ss[2 * N] = static_cast<T>(Hq * hd);
    ss[2 * N + 1] = static_cast<T>(Hkv * hd);
    TensorAllReduce(ss, 2 * N + 2);
    qk_features_[0] = static_cast<double>(ss[2 * N]);
    qk_features_[1] = static_cast<double>(ss[2 * N + 1]);
    k::qk_global_rmsnorm_forward(a.qkv, a.qk_raw, a.qk_rstd, ss, w + o.q_norm, w + o.k_norm, N, Hq, Hkv, hd,
                                 qk_features_[0], qk_features_[1], cfg_.norm_eps);
  } else if (cfg_.qk_norm) {
    k::qk_rmsnorm_forward(a.qkv, a.qk_raw, a.qk_rstd, w + o.q_norm, w + o.k_norm, N, Hq, Hkv, hd, cfg_.norm_eps);
  }
  if (llama) k::rope_forward(a.qkv, rope_.data() + s.pos * hd, s.rows, s.len, Hq, Hkv, hd);  // hd/2 (cos, sin) per position
  if (s.cache) {
    // Append the new positions' keys and values, then attend over everything cached.
    const int64_t KD = Hkv * hd;
    for (int64_t i = 0; i < s.len; ++i) {
      std::memcpy(s.cache->Keys(l) + (s.pos + i) * KD, a.qkv + i * d.S + Hq * hd, sizeof(T) * KD);
      std::memcpy(s.cache->Values(l) + (s.pos + i) * KD, a.qkv + i * d.S + Hq * hd + KD, sizeof(T) * KD);
    }
    k::attention_cached_forward(a.atty, a.att, a.qkv, s.cache->Keys(l), s.cache->Values(l), s.len, s.pos, Hq, Hkv,
                                hd, AttentionFor(l));
  } else {
    k::attention_forward(a.atty, a.att, a.qkv, s.rows, s.len, Hq, Hkv, hd, AttentionFor(l));
  }
  // With post_attn_norm (gemma2) the block's output is normalised before the residual add.
  T* attn_out = cfg_.post_attn_norm ? a.attn_out : av_.scratch_c;
  k::matmul_forward(attn_out, a.atty, w + o.wo, RowParallelBias(w, o.bo), N, d.QD, C);
  TensorAllReduce(attn_out, N * C);
  if (cfg_.post_attn_norm)
    k::rmsnorm_forward(av_.scratch_c, a.rstd_pa, a.attn_out, w + o.post_attn_norm, N, C, cfg_.norm_eps);
  k::residual_forward(a.x_mid, x_in, av_.scratch_c, N * C);
  // MLP block: x_out = x_mid + down(act(up(norm2(x_mid))))
  if (cfg_.pre_norm && llama) k::rmsnorm_forward(a.norm2, a.rstd2, a.x_mid, w + o.mlp_norm_w, N, C, cfg_.norm_eps);
  else if (cfg_.pre_norm) k::layernorm_forward(a.norm2, a.mean2, a.rstd2, a.x_mid, w + o.mlp_norm_w, w + o.mlp_norm_b, N, C, cfg_.norm_eps);
  const T* mlp_in = cfg_.pre_norm ? a.norm2 : a.x_mid;
  if (llama) {
    k::matmul_forward(a.up, mlp_in, w + o.w_gate, static_cast<const T*>(nullptr), N, C, d.U);  // gate and up
    if (cfg_.mlp_activation == MlpActivation::kGeGlu) k::geglu_forward(a.h, a.up, N, d.F);
    else k::swiglu_forward(a.h, a.up, N, d.F);
  } else {
    k::matmul_forward(a.up, a.norm2, w + o.w_up, w + o.b_up, N, C, d.F);
    k::gelu_forward(a.h, a.up, N * d.F);
  }
  T* mlp_out = cfg_.post_ffw_norm ? a.mlp_out : av_.scratch_c;
  k::matmul_forward(mlp_out, a.h, w + o.w_down, RowParallelBias(w, o.b_down), N, d.F, C);
  TensorAllReduce(mlp_out, N * C);
  if (cfg_.post_ffw_norm)
    k::rmsnorm_forward(av_.scratch_c, a.rstd_pf, a.mlp_out, w + o.post_ffw_norm, N, C, cfg_.norm_eps);
  k::residual_forward(x_out, a.x_mid, av_.scratch_c, N * C);
}

template <typename T>
void Transformer<T>::LayerBackward(int64_t l, const T* w, T* g, LayerActs& a, const T* x_in, T* dx, int64_t rows) {
  // On entry dx holds dL/dx_out; on exit dL/dx_in.
  const Dims d = MakeDims(cfg_, rows, seq_len_);
  const LayerOffsets& o = layout_.layers[l];
  const bool llama = cfg_.family == ModelFamily::kLlama;
  const int64_t N = d.N, C = d.C;
  auto gb = [&](int64_t off) { return off >= 0 ? g + off : nullptr; };
  // MLP block. The residual path passes dx through unchanged to x_mid. scratch_c (free
  // in backward) takes the gradient of a post-normalised output before its norm.
  const T* d_mlp_out = dx;
  if (cfg_.post_ffw_norm) {
    std::memset(av_.scratch_c, 0, sizeof(T) * N * C);
    k::rmsnorm_backward(av_.scratch_c, g + o.post_ffw_norm, dx, a.mlp_out, w + o.post_ffw_norm, a.rstd_pf, N, C);
    d_mlp_out = av_.scratch_c;
  }
  std::memset(av_.d_h, 0, sizeof(T) * N * d.F);
  k::matmul_backward(av_.d_h, g + o.w_down, gb(o.b_down), d_mlp_out, a.h, w + o.w_down, N, d.F, C);
  if (llama) {
    if (cfg_.mlp_activation == MlpActivation::kGeGlu) k::geglu_backward(av_.d_up, av_.d_h, a.up, N, d.F);
    else k::swiglu_backward(av_.d_up, av_.d_h, a.up, N, d.F);
  } else {
    k::gelu_backward(av_.d_up, a.up, av_.d_h, N * d.F);
  }
  std::memset(av_.d_norm, 0, sizeof(T) * N * C);
  const T* mlp_in = cfg_.pre_norm ? a.norm2 : a.x_mid;
  if (llama) k::matmul_backward(av_.d_norm, g + o.w_gate, static_cast<T*>(nullptr), av_.d_up, mlp_in, w + o.w_gate, N, C, d.U);
  else k::matmul_backward(av_.d_norm, g + o.w_up, g + o.b_up, av_.d_up, mlp_in, w + o.w_up, N, C, d.U);
  TensorAllReduce(av_.d_norm, N * C);
  if (!cfg_.pre_norm) k::residual_forward(dx, dx, av_.d_norm, N * C);  // the MLP read x_mid itself
  else if (llama) k::rmsnorm_backward(dx, g + o.mlp_norm_w, av_.d_norm, a.x_mid, w + o.mlp_norm_w, a.rstd2, N, C);
  else k::layernorm_backward(dx, g + o.mlp_norm_w, g + o.mlp_norm_b, av_.d_norm, a.x_mid, w + o.mlp_norm_w, a.mean2, a.rstd2, N, C);
  // Attention block; dx now holds dL/dx_mid.
  const T* d_attn_out = dx;
  if (cfg_.post_attn_norm) {
    std::memset(av_.scratch_c, 0, sizeof(T) * N * C);
    k::rmsnorm_backward(av_.scratch_c, g + o.post_attn_norm, dx, a.attn_out, w + o.post_attn_norm, a.rstd_pa, N, C);
    d_attn_out = av_.scratch_c;
  }
  std::memset(av_.d_atty, 0, sizeof(T) * N * d.QD);
  k::matmul_backward(av_.d_atty, g + o.wo, gb(o.bo), d_attn_out, a.atty, w + o.wo, N, d.QD, C);
  k::attention_backward(av_.d_qkv, av_.d_atty, a.qkv, a.att, rows, seq_len_, cfg_.num_heads, cfg_.num_kv_heads,
                        cfg_.head_dim, AttentionFor(l));
  if (llama) k::rope_backward(av_.d_qkv, rope_.data(), rows, seq_len_, cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim);
  const int64_t Hq = cfg_.num_heads, Hkv = cfg_.num_kv_heads;
  if (cfg_.qk_norm && cfg_.qk_norm_global) {
    // The scales are split with the heads; the rows' dot products cover every head.
    T* dot = qk_stats_.data();
    k::qk_global_rmsnorm_dot(dot, av_.d_qkv, a.qk_raw, w + o.q_norm, w + o.k_norm, N, Hq, Hkv, cfg_.head_dim);
    TensorAllReduce(dot, 2 * N);
    k::qk_global_rmsnorm_backward(av_.d_qkv, g + o.q_norm, g + o.k_norm, a.qk_raw, a.qk_rstd, dot, w + o.q_norm,
                                  w + o.k_norm, N, Hq, Hkv, cfg_.head_dim, qk_features_[0], qk_features_[1]);
  } else if (cfg_.qk_norm) {
    // The scales are replicated over tensor ranks but each rank sees only its heads: the
    // gradient of this micro-batch is summed over the ranks before it is accumulated.
    std::fill(qk_norm_grad_.begin(), qk_norm_grad_.end(), T(0));
    const int64_t hd = cfg_.head_dim;
    k::qk_rmsnorm_backward(av_.d_qkv, qk_norm_grad_.data(), qk_norm_grad_.data() + hd, a.qk_raw, a.qk_rstd,
                           w + o.q_norm, w + o.k_norm, N, cfg_.num_heads, cfg_.num_kv_heads, hd);
    TensorAllReduce(qk_norm_grad_.data(), 2 * hd);
    for (int64_t i = 0; i < hd; ++i) {
      g[o.q_norm + i] += qk_norm_grad_[i];
      g[o.k_norm + i] += qk_norm_grad_[hd + i];
    }
  }
  std::memset(av_.d_norm, 0, sizeof(T) * N * C);
  const T* attn_in = cfg_.pre_norm ? a.norm1 : x_in;
  k::matmul_backward(av_.d_norm, g + o.wq, gb(o.bq), av_.d_qkv, attn_in, w + o.wq, N, C, d.S);
  TensorAllReduce(av_.d_norm, N * C);
  if (!cfg_.pre_norm) k::residual_forward(dx, dx, av_.d_norm, N * C);
  else if (llama) k::rmsnorm_backward(dx, g + o.attn_norm_w, av_.d_norm, x_in, w + o.attn_norm_w, a.rstd1, N, C);
  else k::layernorm_backward(dx, g + o.attn_norm_w, g + o.attn_norm_b, av_.d_norm, x_in, w + o.attn_norm_w, a.mean1, a.rstd1, N, C);
}

template <typename T>
void Transformer<T>::SetTensorParallel(int tensor_rank, AllReduceFn allreduce) {
  tensor_rank_ = tensor_rank;
  tensor_allreduce_ = std::move(allreduce);
}

template <typename T>
void Transformer<T>::TensorAllReduce(T* data, int64_t n) {
  if (!tensor_allreduce_ || !comm_status_.ok()) return;
  comm_status_ = tensor_allreduce_(data, n);
}

template <typename T>
void Transformer<T>::Hook(const std::function<Status(int)>& f, int unit) {
  if (!f || !comm_status_.ok()) return;
  comm_status_ = f(unit);
}

template <typename T>
bool Transformer<T>::KeepGoing() {
  if (comm_status_.ok() && cancelled_ && cancelled_())
    comm_status_ = Status::Cancelled("the step was cancelled: the generation is over");
  return comm_status_.ok();
}

template <typename T>
const T* Transformer<T>::RowParallelBias(const T* w, int64_t off) const {
  return off >= 0 && tensor_rank_ == 0 ? w + off : nullptr;
}

template <typename T>
double Transformer<T>::ForwardImpl(const T* w, const int32_t* inputs, const int32_t* targets, int64_t rows, T* g,
                                   T dloss) {
  const Dims d = MakeDims(cfg_, rows, seq_len_);
  const int64_t N = d.N, C = d.C, L = cfg_.num_layers;
  const bool llama = cfg_.family == ModelFamily::kLlama;
  const bool remat = remat_ == RematPolicy::kFull;
  comm_status_ = Status::OK();
  const int post = static_cast<int>(L) + 1;
  Hook(hooks_.acquire, 0);
  Hook(hooks_.acquire, post);
  k::embedding_forward(av_.resid[0], inputs, w + layout_.wte, llama ? nullptr : w + layout_.wpe, rows, seq_len_, C);
  if (cfg_.embedding_scale != 1.0) k::scale_inplace(av_.resid[0], static_cast<T>(cfg_.embedding_scale), N * C);
  for (int64_t l = 0; l < L; ++l) {
    if (!KeepGoing()) return 0.0;
    Hook(hooks_.acquire, 1 + l);
    LayerForward(l, w, ActsFor(l), av_.resid[l], av_.resid[l + 1], Span{rows, seq_len_});
    Hook(hooks_.release, 1 + l);
  }
  if (llama) k::rmsnorm_forward(av_.final_norm, av_.final_rstd, av_.resid[L], w + layout_.final_norm_w, N, C, cfg_.norm_eps);
  else k::layernorm_forward(av_.final_norm, av_.final_mean, av_.final_rstd, av_.resid[L], w + layout_.final_norm_w, w + layout_.final_norm_b, N, C, cfg_.norm_eps);
  k::matmul_forward(av_.logits, av_.final_norm, w + layout_.lm_head, static_cast<const T*>(nullptr), N, C, d.V);
  // MaxText's normalize_embedding_logits divides tied logits by sqrt(emb_dim).
  const bool tied = layout_.lm_head == layout_.wte;
  const T logit_scale = static_cast<T>(tied && cfg_.normalize_embedding_logits ? 1.0 / std::sqrt(static_cast<double>(C)) : 1.0);
  if (logit_scale != T(1)) k::scale_inplace(av_.logits, logit_scale, N * d.V);
  auto release_ends = [&] {
    Hook(hooks_.release, post);
    Hook(hooks_.release, 0);
  };
  if (!targets) {
    release_ends();
    return 0.0;
  }
  // With gradients, dlogits overwrite the logits in place.
  const k::LossOptions loss_opt{cfg_.z_loss, cfg_.final_logits_soft_cap};
  k::crossentropy_forward_backward(av_.losses, g ? av_.logits : static_cast<T*>(nullptr), av_.logits, targets, N, d.V,
                                   dloss, loss_opt);
  double loss_sum = 0;
  for (int64_t n = 0; n < N; ++n) loss_sum += av_.losses[n];
  if (!g) {
    release_ends();
    return loss_sum;
  }

  // Backward: head, final norm, layers in reverse, embeddings. The head's gradient goes
  // to unit L+1, or to unit 0 when it is the tied embedding (gpt2).
  Hook(hooks_.grads_begin, post);
  if (tied) Hook(hooks_.grads_begin, 0);
  if (logit_scale != T(1)) k::scale_inplace(av_.logits, logit_scale, N * d.V);
  std::memset(av_.d_norm, 0, sizeof(T) * N * C);
  k::matmul_backward(av_.d_norm, g + layout_.lm_head, static_cast<T*>(nullptr), av_.logits, av_.final_norm, w + layout_.lm_head, N, C, d.V);
  std::memset(av_.d_resid, 0, sizeof(T) * N * C);
  if (llama) k::rmsnorm_backward(av_.d_resid, g + layout_.final_norm_w, av_.d_norm, av_.resid[L], w + layout_.final_norm_w, av_.final_rstd, N, C);
  else k::layernorm_backward(av_.d_resid, g + layout_.final_norm_w, g + layout_.final_norm_b, av_.d_norm, av_.resid[L], w + layout_.final_norm_w, av_.final_mean, av_.final_rstd, N, C);
  for (int64_t l = L - 1; l >= 0; --l) {
    if (!KeepGoing()) return 0.0;
    // Recomputing writes the same values into av_.resid[l+1] again; it is no longer read.
    Hook(hooks_.acquire, 1 + l);
    if (remat) LayerForward(l, w, ActsFor(l), av_.resid[l], av_.resid[l + 1], Span{rows, seq_len_});
    Hook(hooks_.grads_begin, 1 + l);
    LayerBackward(l, w, g, ActsFor(l), av_.resid[l], av_.d_resid, rows);
    Hook(hooks_.grads_ready, 1 + l);
    Hook(hooks_.release, 1 + l);
  }
  if (!tied) Hook(hooks_.grads_begin, 0);
  if (cfg_.embedding_scale != 1.0) k::scale_inplace(av_.d_resid, static_cast<T>(cfg_.embedding_scale), N * C);
  k::embedding_backward(g + layout_.wte, llama ? static_cast<T*>(nullptr) : g + layout_.wpe, av_.d_resid, inputs, rows, seq_len_, C);
  Hook(hooks_.grads_ready, post);
  Hook(hooks_.grads_ready, 0);
  release_ends();
  return loss_sum;
}

template <typename T>
double Transformer<T>::Forward(const T* params, const int32_t* inputs, const int32_t* targets, int64_t rows) {
  return ForwardImpl(params, inputs, targets, rows, nullptr, T(0));
}

template <typename T>
double Transformer<T>::ForwardBackward(const T* params, T* grads, const int32_t* inputs, const int32_t* targets,
                                       int64_t rows, T dloss) {
  return ForwardImpl(params, inputs, targets, rows, grads, dloss);
}

template <typename T>
KvCache<T> Transformer<T>::NewKvCache() const {
  KvCache<T> c;
  c.capacity = seq_len_;
  c.kv_dim = cfg_.num_kv_heads * cfg_.head_dim;
  c.k.assign(cfg_.num_layers * c.capacity * c.kv_dim, T(0));
  c.v.assign(c.k.size(), T(0));
  return c;
}

template <typename T>
Status Transformer<T>::Decode(const T* w, const int32_t* tokens, int64_t n, KvCache<T>* cache, T* logits) {
  const int64_t pos = cache ? cache->length : 0;
  if (n < 1) return Status::InvalidArgument(fmt::format("decode: {} tokens; expected at least one", n));
  if (cache && (cache->capacity != seq_len_ || cache->kv_dim != cfg_.num_kv_heads * cfg_.head_dim))
    return Status::InvalidArgument("decode: the KV cache was made for another model (Transformer::NewKvCache)");
  if (n > seq_len_ - pos)
    return Status::InvalidArgument(fmt::format("decode: positions {}..{} are beyond the model's context of {} tokens "
                                          "(max_target_length)", pos, pos + n - 1, seq_len_));
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab_size)
      return Status::InvalidArgument(fmt::format("decode: token id {} at position {} is outside the model's "
                                                 "vocabulary [0, {}) (vocab_size)", tokens[i], pos + i,
                                                 cfg_.vocab_size));
  if (tensor_allreduce_ || hooks_.acquire)
    return Status::FailedPrecondition("decode: a single-rank model only (no tensor parallelism or FSDP hooks)");
  const Span s{1, n, pos, cache};
  const Dims d = MakeDims(cfg_, 1, n);
  const int64_t C = d.C, L = cfg_.num_layers, V = cfg_.vocab_size;
  const bool llama = cfg_.family == ModelFamily::kLlama;
  comm_status_ = Status::OK();
  k::embedding_forward(av_.resid[0], tokens, w + layout_.wte, llama ? nullptr : w + layout_.wpe + pos * C, 1, n, C);
  if (cfg_.embedding_scale != 1.0) k::scale_inplace(av_.resid[0], static_cast<T>(cfg_.embedding_scale), n * C);
  for (int64_t l = 0; l < L; ++l) LayerForward(l, w, ActsFor(l), av_.resid[l], av_.resid[l + 1], s);
  if (cache) cache->length = pos + n;
  // Only the last position's logits: its final norm and the head over one row.
  const T* last = av_.resid[L] + (n - 1) * C;
  if (llama) k::rmsnorm_forward(av_.final_norm, av_.final_rstd, last, w + layout_.final_norm_w, 1, C, cfg_.norm_eps);
  else k::layernorm_forward(av_.final_norm, av_.final_mean, av_.final_rstd, last, w + layout_.final_norm_w, w + layout_.final_norm_b, 1, C, cfg_.norm_eps);
  k::matmul_forward(logits, av_.final_norm, w + layout_.lm_head, static_cast<const T*>(nullptr), 1, C, V);
  const bool tied = layout_.lm_head == layout_.wte;
  if (tied && cfg_.normalize_embedding_logits)
    k::scale_inplace(logits, static_cast<T>(1.0 / std::sqrt(static_cast<double>(C))), V);
  if (const double cap = cfg_.final_logits_soft_cap; cap > 0)
    for (int64_t i = 0; i < V; ++i) logits[i] = static_cast<T>(cap * std::tanh(static_cast<double>(logits[i]) / cap));
  return Status::OK();
}

template <typename T>
void InitParams(const ModelConfig& cfg, const ParamLayout& layout, uint64_t seed, T* params) {
  // Each tensor draws from its own stream (seed, tensor index), so adding a tensor does
  // not shift the values of the others. Box-Muller on mt19937_64 bits keeps the values
  // independent of the standard library's distribution code.
  const double resid_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(cfg.num_layers));
  for (size_t i = 0; i < layout.tensors.size(); ++i) {
    const ParamTensor& t = layout.tensors[i];
    T* p = params + t.offset;
    if (t.init == ParamInit::kOnes || t.init == ParamInit::kZeros) {
      for (int64_t j = 0; j < t.size; ++j) p[j] = t.init == ParamInit::kOnes ? T(1) : T(0);
      continue;
    }
    const double stddev = 0.02 * (t.init == ParamInit::kNormalResidual ? resid_scale : 1.0);
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + i + 1);
    auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };
    for (int64_t j = 0; j < t.size; j += 2) {
      double u1 = uniform(), u2 = uniform();
      double r = std::sqrt(-2.0 * std::log(u1));
      p[j] = static_cast<T>(stddev * r * std::cos(2 * M_PI * u2));
      if (j + 1 < t.size) p[j + 1] = static_cast<T>(stddev * r * std::sin(2 * M_PI * u2));
    }
  }
}

template class Transformer<float>;
template class Transformer<double>;
template void InitParams<float>(const ModelConfig&, const ParamLayout&, uint64_t, float*);
template void InitParams<double>(const ModelConfig&, const ParamLayout&, uint64_t, double*);

}  // namespace elastrain
