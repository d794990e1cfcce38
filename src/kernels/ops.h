// Forward and backward kernels of a decoder-only transformer, on the CPU, templated on
// the scalar type (float for training, double for gradient checks).
// Conventions (llm.c): arguments go outputs, inputs, then sizes; every buffer is
// row-major; backward kernels ACCUMULATE (+=) into parameter gradients and into the
// gradients of inputs unless the comment says "writes". N = B*T rows.
// Loops run on OpenMP threads with static schedules, so results are bit-identical
// from run to run for the same thread count. Plain versions of each kernel live in
// kernels/reference.h; tests check these against them.
#pragma once

#include <cstdint>

namespace elastrain::kernels {

// out (N,C) = wte[tokens] (+ wpe[t] when wpe != nullptr); tokens (B,T), wte (V,C), wpe (maxT,C)
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn, int64_t C);
// dwte (V,C) +=, dwpe (maxT,C) += (when non-null); dout (N,C)
template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int64_t B, int64_t Tn, int64_t C);

// RMSNorm: out (N,C) = inp * rstd * weight; rstd (N) is saved for backward.
template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, int64_t N, int64_t C, double eps);
template <typename T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const T* rstd, int64_t N,
                      int64_t C);

// LayerNorm: out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) saved.
template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C,
                       double eps);
template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
                        const T* rstd, int64_t N, int64_t C);

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC, may be null). Writes out.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C, int64_t OC);
// dinp (N,C) +=, dweight (OC,C) +=, dbias (OC) += (when non-null); dout (N,OC)
template <typename T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int64_t N,
                     int64_t C, int64_t OC);

// Rotary embeddings, in place, on the q and k heads of qkv (B,T,(Hq+2Hkv)*hd): pairs
// (2i, 2i+1) of each head at position t are rotated by t * theta^(-2i/hd).
// cos_sin (T, hd/2, 2) from rope_table. Backward rotates gradients by the inverse angle.
// llama31_scaling: the frequencies of Llama 3.1 (Meta's apply_scaling; MaxText's
// LLaMARotaryEmbedding with use_scale): wavelengths under 8192/4 tokens kept, over
// 8192 divided by 8, smoothly interpolated between.
template <typename T>
void rope_table(T* cos_sin, int64_t Tn, int64_t hd, double theta, bool llama31_scaling = false);
template <typename T>
void rope_forward(T* qkv, const T* cos_sin, int64_t B, int64_t Tn, int64_t Hq, int64_t Hkv, int64_t hd);
template <typename T>
void rope_backward(T* dqkv, const T* cos_sin, int64_t B, int64_t Tn, int64_t Hq, int64_t Hkv, int64_t hd);

// QK norm (qwen3): RMSNorm over head_dim of every q and k head of qkv (N,(Hq+2Hkv)*hd),
// in place, with the scale wq (hd) for q heads and wk (hd) for k heads. raw (N,(Hq+Hkv)*hd)
// keeps the inputs and rstd (N,Hq+Hkv) their statistics for backward.
template <typename T>
void qk_rmsnorm_forward(T* qkv, T* raw, T* rstd, const T* wq, const T* wk, int64_t N, int64_t Hq, int64_t Hkv,
                        int64_t hd, double eps);
// In place on dqkv's q and k heads: the normalised heads' gradients become the inputs'.
// dwq, dwk (hd) +=.
template <typename T>
void qk_rmsnorm_backward(T* dqkv, T* dwq, T* dwk, const T* raw, const T* rstd, const T* wq, const T* wk, int64_t N,
                         int64_t Hq, int64_t Hkv, int64_t hd);

// QK norm over all heads (olmo3): one RMSNorm over the Hq*hd q features of a row and one
// over its Hkv*hd k features, scales wq (Hq*hd) and wk (Hkv*hd). In phases, so that a
// tensor-parallel caller can sum the row statistics over the ranks that hold the other
// heads between them: sumsq (N,2) gets each row's sums of q^2 and k^2 (writes); the
// forward normalises in place with rstd (N,2) = 1/sqrt(sumsq / (dq, dk) + eps), dq and
// dk the feature counts of the whole model, keeping raw (N,(Hq+Hkv)*hd).
template <typename T>
void qk_global_sumsq(T* sumsq, const T* qkv, int64_t N, int64_t Hq, int64_t Hkv, int64_t hd);
template <typename T>
void qk_global_rmsnorm_forward(T* qkv, T* raw, T* rstd, const T* sumsq, const T* wq, const T* wk, int64_t N,
                               int64_t Hq, int64_t Hkv, int64_t hd, double dq, double dk, double eps);
// Backward: dot (N,2) gets sum(dy * w * x) of each row's q and k features (writes; sum it
// over the ranks likewise), then the backward turns dqkv's q and k gradients into the
// inputs' in place and adds dwq, dwk.
template <typename T>
void qk_global_rmsnorm_dot(T* dot, const T* dqkv, const T* raw, const T* wq, const T* wk, int64_t N, int64_t Hq,
                           int64_t Hkv, int64_t hd);
template <typename T>
void qk_global_rmsnorm_backward(T* dqkv, T* dwq, T* dwk, const T* raw, const T* rstd, const T* dot, const T* wq,
                                const T* wk, int64_t N, int64_t Hq, int64_t Hkv, int64_t hd, double dq, double dk);

// What shapes the attention scores beyond the causal mask: a query at t sees keys in
// (t - window, t] when window > 0 (MaxText's sliding_window_size), and the scaled scores
// become soft_cap * tanh(s / soft_cap) when soft_cap > 0 (attn_logits_soft_cap).
struct AttentionOptions {
  int64_t window = 0;
  double soft_cap = 0.0;
};
// Causal grouped-query attention. qkv (B,T,(Hq+2Hkv)*hd): q heads, then k heads, then
// v heads; query head h reads kv head h / (Hq/Hkv). Writes out (B,T,Hq*hd) and the
// softmax probabilities att (B,Hq,T,T) (only the lower triangle is meaningful).
template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int64_t B, int64_t Tn, int64_t Hq, int64_t Hkv, int64_t hd,
                       AttentionOptions opt = {});
// The same for incremental decoding of one sequence: n new queries at positions
// [pos, pos+n), q heads from qkv (n,(Hq+2Hkv)*hd), over the cached keys and values of
// positions [0, pos+n) (the new ones already appended): kc, vc (pos+n, Hkv*hd). Writes
// out (n,Hq*hd) and att (Hq, n, pos+n). With pos = 0 it computes what attention_forward
// does for B = 1, in the same order.
template <typename T>
void attention_cached_forward(T* out, T* att, const T* qkv, const T* kc, const T* vc, int64_t n, int64_t pos,
                              int64_t Hq, int64_t Hkv, int64_t hd, AttentionOptions opt = {});
// Writes dqkv (B,T,(Hq+2Hkv)*hd) (it is overwritten, not accumulated).
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int64_t B, int64_t Tn, int64_t Hq,
                        int64_t Hkv, int64_t hd, AttentionOptions opt = {});

// SwiGLU: gu (N,2F) holds [gate | up] per row; out (N,F) = silu(gate) * up. Writes out.
template <typename T>
void swiglu_forward(T* out, const T* gu, int64_t N, int64_t F);
// Writes dgu (N,2F).
template <typename T>
void swiglu_backward(T* dgu, const T* dout, const T* gu, int64_t N, int64_t F);

// GeGLU (gemma): gu (N,2F) holds [gate | up]; out (N,F) = gelu(gate) * up (tanh GELU).
// Writes out; backward writes dgu (N,2F).
template <typename T>
void geglu_forward(T* out, const T* gu, int64_t N, int64_t F);
template <typename T>
void geglu_backward(T* dgu, const T* dout, const T* gu, int64_t N, int64_t F);

// GELU, tanh approximation (GPT-2). Writes out (n); backward writes dinp (n).
template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n);
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n);

// out (n) = a + b. Writes out.
template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n);
// x (n) *= s, in place.
template <typename T>
void scale_inplace(T* x, T s, int64_t n);

// What the loss adds to plain softmax cross-entropy: soft_cap > 0 first replaces the
// logits by soft_cap * tanh(x / soft_cap) (final_logits_soft_cap); z_loss > 0 adds
// z_loss * logsumexp(logits)^2 to every unmasked token's loss (MaxText's
// z_loss_multiplier, reported inside the loss as MaxText does).
struct LossOptions {
  double z_loss = 0.0;
  double soft_cap = 0.0;
};
// Softmax cross-entropy over logits (N,V). losses (N) gets -log p[target] (0 where
// target < 0, which masks a position). When dlogits is non-null it is written with
// (softmax - onehot) * dloss (the gradient w.r.t. the raw logits), and may alias logits
// (computed in place).
template <typename T>
void crossentropy_forward_backward(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t N,
                                   int64_t V, T dloss, LossOptions opt = {});

}  // namespace elastrain::kernels
