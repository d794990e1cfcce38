#include "model/transformer.h"

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/ops.h"

namespace elastrain {

namespace k = kernels;

template <typename T>
struct Transformer<T>::LayerActs {
  T *norm1, *mean1, *rstd1;  // attention-norm output (N,C) and its statistics (N)
  T* qkv;                    // (N, (Hq+2Hkv)*hd), after RoPE for llama
  T* att;                    // (B, Hq, T, T) softmax probabilities
  T* atty;                   // (N, Hq*hd) attention output before the wo projection
  T* x_mid;                  // (N,C) residual stream after attention
  T *norm2, *mean2, *rstd2;  // MLP-norm output and statistics
  T* up;                     // (N,2F) [gate|up] for llama, (N,F) pre-GELU for gpt2
  T* h;                      // (N,F) MLP hidden activation
};

namespace {
// Hands out consecutive ranges of one buffer; with base == nullptr it only counts.
template <typename T>
struct Carver {
  T* base = nullptr;
  int64_t used = 0;
  T* take(int64_t n) {
    T* p = base ? base + used : nullptr;
    used += n;
    return p;
  }
};

struct Dims {
  int64_t N, C, S, QD, F, U, B, T, Hq, V;
};
Dims MakeDims(const ModelConfig& m, int64_t B, int64_t T) {
  Dims d;
  d.B = B;
  d.T = T;
  d.N = B * T;
  d.C = m.emb_dim;
  d.QD = m.num_heads * m.head_dim;
  d.S = (m.num_heads + 2 * m.num_kv_heads) * m.head_dim;
  d.F = m.mlp_dim;
  d.U = m.family == ModelFamily::kLlama ? 2 * m.mlp_dim : m.mlp_dim;
  d.Hq = m.num_heads;
  d.V = m.vocab_size;
  return d;
}
}  // namespace

// Lays out every activation buffer; the same code counts (base null) and assigns.
template <typename T, typename Acts>
static void CarveActivations(Carver<T>& cv, const Dims& d, int64_t L, bool remat,
                             std::vector<std::unique_ptr<Acts>>* layer_acts, std::vector<T*>* resid, T** final_norm,
                             T** final_mean, T** final_rstd, T** logits, T** losses, T** d_resid, T** d_norm,
                             T** d_qkv, T** d_atty, T** d_up, T** d_h, T** scratch_c) {
  const int64_t N = d.N;
  resid->clear();
  for (int64_t l = 0; l <= L; ++l) resid->push_back(cv.take(N * d.C));
  layer_acts->clear();
  for (int64_t l = 0; l < (remat ? 1 : L); ++l) {
    auto a = std::make_unique<Acts>();
    a->norm1 = cv.take(N * d.C);
    a->mean1 = cv.take(N);
    a->rstd1 = cv.take(N);
    a->qkv = cv.take(N * d.S);
    a->att = cv.take(d.B * d.Hq * d.T * d.T);
    a->atty = cv.take(N * d.QD);
    a->x_mid = cv.take(N * d.C);
    a->norm2 = cv.take(N * d.C);
    a->mean2 = cv.take(N);
    a->rstd2 = cv.take(N);
    a->up = cv.take(N * d.U);
    a->h = cv.take(N * d.F);
    layer_acts->push_back(std::move(a));
  }
  *final_norm = cv.take(N * d.C);
  *final_mean = cv.take(N);
  *final_rstd = cv.take(N);
  *logits = cv.take(N * d.V);
  *losses = cv.take(N);
  *d_resid = cv.take(N * d.C);
  *d_norm = cv.take(N * d.C);
  *d_qkv = cv.take(N * d.S);
  *d_atty = cv.take(N * d.QD);
  *d_up = cv.take(N * d.U);
  *d_h = cv.take(N * d.F);
  *scratch_c = cv.take(N * d.C);
}

template <typename T>
int64_t Transformer<T>::ActivationFloats(const ModelConfig& cfg, int64_t batch, int64_t seq_len, RematPolicy remat) {
  Carver<T> cv;
  std::vector<std::unique_ptr<LayerActs>> la;
  std::vector<T*> resid;
  T* p[13];
  CarveActivations(cv, MakeDims(cfg, batch, seq_len), cfg.num_layers, remat == RematPolicy::kFull, &la, &resid,
                   &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &p[8], &p[9], &p[10], &p[11]);
  return cv.used;
}

template <typename T>
Transformer<T>::Transformer(const ModelConfig& cfg, int64_t max_batch, int64_t seq_len, RematPolicy remat)
    : cfg_(cfg), layout_(BuildParamLayout(cfg)), max_batch_(max_batch), seq_len_(seq_len), remat_(remat) {
  acts_.assign(ActivationFloats(cfg, max_batch, seq_len, remat), T(0));
  Carver<T> cv{acts_.data(), 0};
  CarveActivations(cv, MakeDims(cfg, max_batch, seq_len), cfg.num_layers, remat == RematPolicy::kFull,
                   &layer_acts_, &resid_, &final_norm_, &final_mean_, &final_rstd_, &logits_, &losses_, &d_resid_,
                   &d_norm_, &d_qkv_, &d_atty_, &d_up_, &d_h_, &scratch_c_);
  if (cfg.family == ModelFamily::kLlama) {
    rope_.resize(seq_len * cfg.head_dim);
    k::rope_table(rope_.data(), seq_len, cfg.head_dim, cfg.rope_theta);
  }
}

template <typename T>
Transformer<T>::~Transformer() = default;

template <typename T>
typename Transformer<T>::LayerActs& Transformer<T>::ActsFor(int64_t l) {
  return *layer_acts_[remat_ == RematPolicy::kFull ? 0 : l];
}

template <typename T>
void Transformer<T>::LayerForward(int64_t l, const T* w, LayerActs& a, const T* x_in, T* x_out, int64_t rows) {
  const Dims d = MakeDims(cfg_, rows, seq_len_);
  const LayerOffsets& o = layout_.layers[l];
  const bool llama = cfg_.family == ModelFamily::kLlama;
  const int64_t N = d.N, C = d.C;
  auto bias = [&](int64_t off) { return off >= 0 ? w + off : nullptr; };
  // attention block: x_mid = x_in + wo(attention(norm1(x_in)))
  if (llama) k::rmsnorm_forward(a.norm1, a.rstd1, x_in, w + o.attn_norm_w, N, C, cfg_.norm_eps);
  else k::layernorm_forward(a.norm1, a.mean1, a.rstd1, x_in, w + o.attn_norm_w, w + o.attn_norm_b, N, C, cfg_.norm_eps);
  k::matmul_forward(a.qkv, a.norm1, w + o.wq, bias(o.bq), N, C, d.S);
  if (llama) k::rope_forward(a.qkv, rope_.data(), rows, seq_len_, cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim);
  k::attention_forward(a.atty, a.att, a.qkv, rows, seq_len_, cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim);
  k::matmul_forward(scratch_c_, a.atty, w + o.wo, RowParallelBias(w, o.bo), N, d.QD, C);
  TensorAllReduce(scratch_c_, N * C);
  k::residual_forward(a.x_mid, x_in, scratch_c_, N * C);
  // MLP block: x_out = x_mid + down(act(up(norm2(x_mid))))
  if (llama) k::rmsnorm_forward(a.norm2, a.rstd2, a.x_mid, w + o.mlp_norm_w, N, C, cfg_.norm_eps);
  else k::layernorm_forward(a.norm2, a.mean2, a.rstd2, a.x_mid, w + o.mlp_norm_w, w + o.mlp_norm_b, N, C, cfg_.norm_eps);
  if (llama) {
    k::matmul_forward(a.up, a.norm2, w + o.w_gate, static_cast<const T*>(nullptr), N, C, d.U);  // gate and up
    k::swiglu_forward(a.h, a.up, N, d.F);
  } else {
    k::matmul_forward(a.up, a.norm2, w + o.w_up, w + o.b_up, N, C, d.F);
    k::gelu_forward(a.h, a.up, N * d.F);
  }
  k::matmul_forward(scratch_c_, a.h, w + o.w_down, RowParallelBias(w, o.b_down), N, d.F, C);
  TensorAllReduce(scratch_c_, N * C);
  k::residual_forward(x_out, a.x_mid, scratch_c_, N * C);
}

template <typename T>
void Transformer<T>::LayerBackward(int64_t l, const T* w, T* g, LayerActs& a, const T* x_in, T* dx, int64_t rows) {
  // On entry dx holds dL/dx_out; on exit dL/dx_in.
  const Dims d = MakeDims(cfg_, rows, seq_len_);
  const LayerOffsets& o = layout_.layers[l];
  const bool llama = cfg_.family == ModelFamily::kLlama;
  const int64_t N = d.N, C = d.C;
  auto gb = [&](int64_t off) { return off >= 0 ? g + off : nullptr; };
  // MLP block. The residual path passes dx through unchanged to x_mid.
  std::memset(d_h_, 0, sizeof(T) * N * d.F);
  k::matmul_backward(d_h_, g + o.w_down, gb(o.b_down), dx, a.h, w + o.w_down, N, d.F, C);
  if (llama) {
    k::swiglu_backward(d_up_, d_h_, a.up, N, d.F);
  } else {
    k::gelu_backward(d_up_, a.up, d_h_, N * d.F);
  }
  std::memset(d_norm_, 0, sizeof(T) * N * C);
  if (llama) k::matmul_backward(d_norm_, g + o.w_gate, static_cast<T*>(nullptr), d_up_, a.norm2, w + o.w_gate, N, C, d.U);
  else k::matmul_backward(d_norm_, g + o.w_up, g + o.b_up, d_up_, a.norm2, w + o.w_up, N, C, d.U);
  TensorAllReduce(d_norm_, N * C);
  if (llama) k::rmsnorm_backward(dx, g + o.mlp_norm_w, d_norm_, a.x_mid, w + o.mlp_norm_w, a.rstd2, N, C);
  else k::layernorm_backward(dx, g + o.mlp_norm_w, g + o.mlp_norm_b, d_norm_, a.x_mid, w + o.mlp_norm_w, a.mean2, a.rstd2, N, C);
  // Attention block; dx now holds dL/dx_mid.
  std::memset(d_atty_, 0, sizeof(T) * N * d.QD);
  k::matmul_backward(d_atty_, g + o.wo, gb(o.bo), dx, a.atty, w + o.wo, N, d.QD, C);
  k::attention_backward(d_qkv_, d_atty_, a.qkv, a.att, rows, seq_len_, cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim);
  if (llama) k::rope_backward(d_qkv_, rope_.data(), rows, seq_len_, cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim);
  std::memset(d_norm_, 0, sizeof(T) * N * C);
  k::matmul_backward(d_norm_, g + o.wq, gb(o.bq), d_qkv_, a.norm1, w + o.wq, N, C, d.S);
  TensorAllReduce(d_norm_, N * C);
  if (llama) k::rmsnorm_backward(dx, g + o.attn_norm_w, d_norm_, x_in, w + o.attn_norm_w, a.rstd1, N, C);
  else k::layernorm_backward(dx, g + o.attn_norm_w, g + o.attn_norm_b, d_norm_, x_in, w + o.attn_norm_w, a.mean1, a.rstd1, N, C);
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
    comm_status_ = Status::Unavailable("the step was cancelled: the generation is over");
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
  k::embedding_forward(resid_[0], inputs, w + layout_.wte, llama ? nullptr : w + layout_.wpe, rows, seq_len_, C);
  for (int64_t l = 0; l < L; ++l) {
    if (!KeepGoing()) return 0.0;
    Hook(hooks_.acquire, 1 + l);
    LayerForward(l, w, ActsFor(l), resid_[l], resid_[l + 1], rows);
    Hook(hooks_.release, 1 + l);
  }
  if (llama) k::rmsnorm_forward(final_norm_, final_rstd_, resid_[L], w + layout_.final_norm_w, N, C, cfg_.norm_eps);
  else k::layernorm_forward(final_norm_, final_mean_, final_rstd_, resid_[L], w + layout_.final_norm_w, w + layout_.final_norm_b, N, C, cfg_.norm_eps);
  k::matmul_forward(logits_, final_norm_, w + layout_.lm_head, static_cast<const T*>(nullptr), N, C, d.V);
  auto release_ends = [&] {
    Hook(hooks_.release, post);
    Hook(hooks_.release, 0);
  };
  if (!targets) {
    release_ends();
    return 0.0;
  }
  // With gradients, dlogits overwrite the logits in place.
  k::crossentropy_forward_backward(losses_, g ? logits_ : static_cast<T*>(nullptr), logits_, targets, N, d.V, dloss);
  double loss_sum = 0;
  for (int64_t n = 0; n < N; ++n) loss_sum += losses_[n];
  if (!g) {
    release_ends();
    return loss_sum;
  }

  // Backward: head, final norm, layers in reverse, embeddings.
  std::memset(d_norm_, 0, sizeof(T) * N * C);
  k::matmul_backward(d_norm_, g + layout_.lm_head, static_cast<T*>(nullptr), logits_, final_norm_, w + layout_.lm_head, N, C, d.V);
  std::memset(d_resid_, 0, sizeof(T) * N * C);
  if (llama) k::rmsnorm_backward(d_resid_, g + layout_.final_norm_w, d_norm_, resid_[L], w + layout_.final_norm_w, final_rstd_, N, C);
  else k::layernorm_backward(d_resid_, g + layout_.final_norm_w, g + layout_.final_norm_b, d_norm_, resid_[L], w + layout_.final_norm_w, final_mean_, final_rstd_, N, C);
  for (int64_t l = L - 1; l >= 0; --l) {
    if (!KeepGoing()) return 0.0;
    // Recomputing writes the same values into resid_[l+1] again; it is no longer read.
    Hook(hooks_.acquire, 1 + l);
    if (remat) LayerForward(l, w, ActsFor(l), resid_[l], resid_[l + 1], rows);
    LayerBackward(l, w, g, ActsFor(l), resid_[l], d_resid_, rows);
    Hook(hooks_.grads_ready, 1 + l);
    Hook(hooks_.release, 1 + l);
  }
  k::embedding_backward(g + layout_.wte, llama ? static_cast<T*>(nullptr) : g + layout_.wpe, d_resid_, inputs, rows, seq_len_, C);
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
