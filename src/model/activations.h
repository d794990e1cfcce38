// The activation memory of one Transformer instance (transformer/transformer.h): every
// buffer of a forward/backward pass, carved out of one flat allocation in a fixed order.
// The same carving counts (to plan memory from a config, without allocating) and assigns
// (to build the model), so the plan and the allocation cannot disagree.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/choice.h"
#include "model/model_config.h"

namespace elastrain {

enum class RematPolicy {
  kNone,  // keep every layer's activations for backward
  kFull,  // keep only each layer's input; recompute the layer in backward
};
// The words of the remat_policy key.
inline constexpr std::array<Choice<RematPolicy>, 2> kRematPolicyChoices = {{
    {"none", RematPolicy::kNone},
    {"full", RematPolicy::kFull},
}};
constexpr std::string_view RematPolicyName(RematPolicy p) { return ChoiceWord(kRematPolicyChoices, p); }

// One layer's saved activations (N = B*T rows).
template <typename T>
struct LayerActivations {
  T *norm1, *mean1, *rstd1;  // attention-norm output (N,C) and its statistics (N)
  T* qkv;                    // (N, (Hq+2Hkv)*hd), after RoPE for llama
  T *qk_raw, *qk_rstd;       // qk_norm: q and k heads before the norm (N,(Hq+Hkv)*hd), rstd (N,Hq+Hkv)
  T* att;                    // (B, Hq, T, T) softmax probabilities
  T* atty;                   // (N, Hq*hd) attention output before the wo projection
  T *attn_out, *rstd_pa;     // post_attn_norm: the attention block's output before its norm (N,C), rstd (N)
  T* x_mid;                  // (N,C) residual stream after attention
  T *norm2, *mean2, *rstd2;  // MLP-norm output and statistics
  T* up;                     // (N,2F) [gate|up] for llama, (N,F) pre-GELU for gpt2
  T* h;                      // (N,F) MLP hidden activation
  T *mlp_out, *rstd_pf;      // post_ffw_norm: the MLP's output before its norm (N,C), rstd (N)
};

// The shapes one pass works with.
struct ActivationDims {
  int64_t N, C, S, QD, F, U, B, T, Hq, V;
  int64_t QKH = 0;                 // q and k heads normalised per row (qk_norm: Hq+Hkv, else 0)
  int64_t hd = 0;
  bool post_attn = false, post_ffw = false;
  bool pre_norm = true;            // false: no norm1/norm2 outputs (olmo3)
};
ActivationDims MakeActivationDims(const ModelConfig& m, int64_t B, int64_t T);

// Everything outside the layers, and the backward scratch.
template <typename T>
struct ModelActivations {
  std::vector<std::unique_ptr<LayerActivations<T>>> layers;  // L, or 1 with remat
  std::vector<T*> resid;  // L+1 residual-stream buffers (N,C): resid[l] is layer l's input
  T *final_norm = nullptr, *final_mean = nullptr, *final_rstd = nullptr, *logits = nullptr, *losses = nullptr;
  T *d_resid = nullptr, *d_norm = nullptr, *d_qkv = nullptr, *d_atty = nullptr, *d_up = nullptr, *d_h = nullptr,
    *scratch_c = nullptr;
};

// Lays out every activation buffer from `base` (nullptr: only counts) and returns the
// number of T's used. Every size and offset is overflow-checked: when one overflows
// int64, *overflow (if given) is set and the count is meaningless (CheckedActivationFloats
// turns that into an error; configs are checked with it when they load).
template <typename T>
int64_t CarveActivations(T* base, const ActivationDims& d, int64_t L, RematPolicy remat, ModelActivations<T>* a,
                         bool* overflow = nullptr) {
  int64_t used = 0;
  bool over = false;
  auto mul = [&](int64_t x, int64_t y) {
    int64_t r = 0;
    over |= __builtin_mul_overflow(x, y, &r);
    return r;
  };
  auto take = [&](int64_t n) {
    T* p = base && !over ? base + used : nullptr;
    over |= __builtin_add_overflow(used, n, &used);
    return p;
  };
  const int64_t N = d.N;
  a->resid.clear();
  for (int64_t l = 0; l <= L; ++l) a->resid.push_back(take(mul(N, d.C)));
  a->layers.clear();
  for (int64_t l = 0; l < (remat == RematPolicy::kFull ? 1 : L); ++l) {
    auto la = std::make_unique<LayerActivations<T>>();
    la->norm1 = take(d.pre_norm ? mul(N, d.C) : 0);
    la->mean1 = take(N);
    la->rstd1 = take(N);
    la->qkv = take(mul(N, d.S));
    la->qk_raw = take(mul(N, mul(d.QKH, d.hd)));
    la->qk_rstd = take(mul(N, d.QKH));
    la->attn_out = take(d.post_attn ? mul(N, d.C) : 0);
    la->rstd_pa = take(d.post_attn ? N : 0);
    la->att = take(mul(mul(mul(d.B, d.Hq), d.T), d.T));
    la->atty = take(mul(N, d.QD));
    la->x_mid = take(mul(N, d.C));
    la->norm2 = take(d.pre_norm ? mul(N, d.C) : 0);
    la->mean2 = take(N);
    la->rstd2 = take(N);
    la->up = take(mul(N, d.U));
    la->h = take(mul(N, d.F));
    la->mlp_out = take(d.post_ffw ? mul(N, d.C) : 0);
    la->rstd_pf = take(d.post_ffw ? N : 0);
    a->layers.push_back(std::move(la));
  }
  a->final_norm = take(mul(N, d.C));
  a->final_mean = take(N);
  a->final_rstd = take(N);
  a->logits = take(mul(N, d.V));
  a->losses = take(N);
  a->d_resid = take(mul(N, d.C));
  a->d_norm = take(mul(N, d.C));
  a->d_qkv = take(mul(N, d.S));
  a->d_atty = take(mul(N, d.QD));
  a->d_up = take(mul(N, d.U));
  a->d_h = take(mul(N, d.F));
  a->scratch_c = take(mul(N, d.C));
  if (overflow) *overflow = over;
  return used;
}

// Floats of activation memory for micro-batches of `batch` rows of `seq_len` tokens.
// For a valid config (see CheckedActivationFloats).
int64_t ActivationFloats(const ModelConfig& cfg, int64_t batch, int64_t seq_len, RematPolicy remat);
// The same, InvalidArgument naming batch and seq_len when the count overflows int64 or
// exceeds kMaxActivationFloats (so that its bytes plus the model's still fit int64).
inline constexpr int64_t kMaxActivationFloats = int64_t{1} << 60;
Result<int64_t> CheckedActivationFloats(const ModelConfig& cfg, int64_t batch, int64_t seq_len, RematPolicy remat);

}  // namespace elastrain
