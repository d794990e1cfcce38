#include "kernels/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/vec_math.h"

namespace elastrain::kernels {

namespace {
// exp for the kernels: the vectorisable ExpF for float (kernels/vec_math.h), libm for
// the double kernels of the gradient checks.
template <typename T>
inline T Exp(T x) {
  if constexpr (std::is_same_v<T, float>) return ExpF(x);
  else return std::exp(x);
}
}  // namespace

namespace {
// Splits [0,n) into omp_get_num_threads() contiguous blocks; returns this thread's.
inline void ThreadBlock(int64_t n, int64_t* begin, int64_t* end) {
  int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
  int64_t per = (n + nt - 1) / nt;
  *begin = std::min(n, id * per);
  *end = std::min(n, *begin + per);
}
}  // namespace

// ---------------------------------------------------------------- embedding
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < B * Tn; ++n) {
    const T* e = wte + static_cast<int64_t>(tokens[n]) * C;
    T* o = out + n * C;
    if (wpe) {
      const T* p = wpe + (n % Tn) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
    } else {
      std::memcpy(o, e, sizeof(T) * C);
    }
  }
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int64_t B, int64_t Tn, int64_t C) {
  // Each thread owns a block of columns, so the scatter-add has no races and a fixed order.
#pragma omp parallel
  {
    int64_t c0, c1;
    ThreadBlock(C, &c0, &c1);
    for (int64_t n = 0; n < B * Tn; ++n) {
      const T* d = dout + n * C;
      T* w = dwte + static_cast<int64_t>(tokens[n]) * C;
      for (int64_t c = c0; c < c1; ++c) w[c] += d[c];
      if (dwpe) {
        T* p = dwpe + (n % Tn) * C;
        for (int64_t c = c0; c < c1; ++c) p[c] += d[c];
      }
    }
  }
}

// ---------------------------------------------------------------- RMSNorm
template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, int64_t N, int64_t C, double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
    T r = static_cast<T>(1.0 / std::sqrt(static_cast<double>(ss) / C + eps));
    rstd[n] = r;
    T* o = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = x[c] * r * weight[c];
  }
}

template <typename T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const T* rstd, int64_t N,
                      int64_t C) {
  // y = x r w with r = (mean(x^2)+eps)^-1/2:  dx = r (w dy) - r^3/C x sum(w dy x)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    T r = rstd[n], dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < C; ++c) dot += weight[c] * dy[c] * x[c];
    T k = r * r * r * dot / static_cast<T>(C);
    T* dx = dinp + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dx[c] += r * weight[c] * dy[c] - k * x[c];
  }
#pragma omp parallel
  {
    int64_t c0, c1;
    ThreadBlock(C, &c0, &c1);
    for (int64_t n = 0; n < N; ++n) {
      const T* x = inp + n * C;
      const T* dy = dout + n * C;
      T r = rstd[n];
      for (int64_t c = c0; c < c1; ++c) dweight[c] += dy[c] * x[c] * r;
    }
  }
}

// ---------------------------------------------------------------- LayerNorm
template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C,
                       double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += x[c];
    T m = s / static_cast<T>(C), v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    T r = static_cast<T>(1.0 / std::sqrt(static_cast<double>(v) / C + eps));
    mean[n] = m;
    rstd[n] = r;
    T* o = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = (x[c] - m) * r * weight[c] + bias[c];
  }
}

template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean,
                        const T* rstd, int64_t N, int64_t C) {
  // xhat = (x-m) r; dxhat = w dy; dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    T m = mean[n], r = rstd[n], s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
    for (int64_t c = 0; c < C; ++c) {
      T dxh = weight[c] * dy[c];
      s1 += dxh;
      s2 += dxh * (x[c] - m) * r;
    }
    s1 /= static_cast<T>(C);
    s2 /= static_cast<T>(C);
    T* dx = dinp + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dx[c] += r * (weight[c] * dy[c] - s1 - (x[c] - m) * r * s2);
  }
#pragma omp parallel
  {
    int64_t c0, c1;
    ThreadBlock(C, &c0, &c1);
    for (int64_t n = 0; n < N; ++n) {
      const T* x = inp + n * C;
      const T* dy = dout + n * C;
      T m = mean[n], r = rstd[n];
      for (int64_t c = c0; c < c1; ++c) {
        dweight[c] += dy[c] * (x[c] - m) * r;
        dbias[c] += dy[c];
      }
    }
  }
}

// ---------------------------------------------------------------- matmul
template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C, int64_t OC) {
  Gemm<T>(false, true, N, OC, C, T(1), inp, C, weight, C, T(0), out, OC);
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      T* o = out + n * OC;
#pragma omp simd
      for (int64_t j = 0; j < OC; ++j) o[j] += bias[j];
    }
  }
}

template <typename T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int64_t N,
                     int64_t C, int64_t OC) {
  if (dinp) Gemm<T>(false, false, N, C, OC, T(1), dout, OC, weight, C, T(1), dinp, C);  // dinp += dout W
  Gemm<T>(true, false, OC, C, N, T(1), dout, OC, inp, C, T(1), dweight, C);            // dW += dout^T inp
  if (dbias) {
#pragma omp parallel
    {
      int64_t j0, j1;
      ThreadBlock(OC, &j0, &j1);
      for (int64_t n = 0; n < N; ++n) {
        const T* d = dout + n * OC;
        for (int64_t j = j0; j < j1; ++j) dbias[j] += d[j];
      }
    }
  }
}

// ---------------------------------------------------------------- RoPE
namespace {
// Llama 3.1's frequency scaling (factor 8, low/high frequency factors 1 and 4, original
// context 8192 tokens).
double Llama31Frequency(double freq) {
  constexpr double kFactor = 8, kLow = 1, kHigh = 4, kOldContext = 8192;
  const double wavelen = 2 * M_PI / freq;
  if (wavelen < kOldContext / kHigh) return freq;
  if (wavelen > kOldContext / kLow) return freq / kFactor;
  const double smooth = (kOldContext / wavelen - kLow) / (kHigh - kLow);
  return (1 - smooth) * freq / kFactor + smooth * freq;
}
}  // namespace

template <typename T>
void rope_table(T* cos_sin, int64_t Tn, int64_t hd, double theta, bool llama31_scaling) {
  for (int64_t t = 0; t < Tn; ++t)
    for (int64_t i = 0; i < hd / 2; ++i) {
      double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      if (llama31_scaling) freq = Llama31Frequency(freq);
      double a = static_cast<double>(t) * freq;
      cos_sin[(t * (hd / 2) + i) * 2 + 0] = static_cast<T>(std::cos(a));
      cos_sin[(t * (hd / 2) + i) * 2 + 1] = static_cast<T>(std::sin(a));
    }
}

namespace {
// Rotates the q and k heads of every row by +angle (sign=1) or -angle (sign=-1).
template <typename T>
void RopeRotate(T* qkv, const T* cos_sin, int64_t B, int64_t Tn, int64_t Hq, int64_t Hkv, int64_t hd, T sign) {
  const int64_t S = (Hq + 2 * Hkv) * hd, half = hd / 2;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < B * Tn; ++n) {
    const T* cs = cos_sin + (n % Tn) * half * 2;
    T* row = qkv + n * S;
    for (int64_t h = 0; h < Hq + Hkv; ++h) {  // q heads then k heads: the first (Hq+Hkv)*hd values
      T* x = row + h * hd;
      for (int64_t i = 0; i < half; ++i) {
        T c = cs[2 * i], s = sign * cs[2 * i + 1];
        T x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}
}  // namespace

template <typename T>
void rope_forward(T* qkv, const T* cos_sin, int64_t B, int64_t Tn, int64_t Hq, int64_t Hkv, int64_t hd) {
  RopeRotate(qkv, cos_sin, B, Tn, Hq, Hkv, hd, T(1));
}
template <typename T>
void rope_backward(T* dqkv, const T* cos_sin, int64_t B, int64_t Tn, int64_t Hq, int64_t Hkv, int64_t hd) {
  RopeRotate(dqkv, cos_sin, B, Tn, Hq, Hkv, hd, T(-1));  // the inverse of a rotation is its transpose
}

// ---------------------------------------------------------------- QK norm
template <typename T>
void qk_rmsnorm_forward(T* qkv, T* raw, T* rstd, const T* wq, const T* wk, int64_t N, int64_t Hq, int64_t Hkv,
                        int64_t hd, double eps) {
  const int64_t S = (Hq + 2 * Hkv) * hd, H = Hq + Hkv;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      T* x = qkv + n * S + h * hd;
      T* keep = raw + (n * H + h) * hd;
      const T* w = h < Hq ? wq : wk;
      double ss = 0;
      for (int64_t i = 0; i < hd; ++i) ss += static_cast<double>(x[i]) * x[i];
      const T r = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(hd) + eps));
      rstd[n * H + h] = r;
      for (int64_t i = 0; i < hd; ++i) {
        keep[i] = x[i];
        x[i] = x[i] * r * w[i];
      }
    }
}

template <typename T>
void qk_rmsnorm_backward(T* dqkv, T* dwq, T* dwk, const T* raw, const T* rstd, const T* wq, const T* wk, int64_t N,
                         int64_t Hq, int64_t Hkv, int64_t hd) {
  const int64_t S = (Hq + 2 * Hkv) * hd, H = Hq + Hkv;
  // Each thread sums its rows' scale gradients apart; the partial sums are added in
  // thread order, so the result is the same from run to run.
  std::vector<std::vector<T>> partial(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel
  {
    std::vector<T> dw(2 * hd, T(0));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h) {
        T* d = dqkv + n * S + h * hd;
        const T* x = raw + (n * H + h) * hd;
        const T* w = h < Hq ? wq : wk;
        T* dws = dw.data() + (h < Hq ? 0 : hd);
        const T r = rstd[n * H + h];
        T dot = 0;  // sum_i dy_i w_i x_i
        for (int64_t i = 0; i < hd; ++i) {
          dot += d[i] * w[i] * x[i];
          dws[i] += d[i] * x[i] * r;
        }
        const T c = dot * r * r * r / static_cast<T>(hd);
        for (int64_t i = 0; i < hd; ++i) d[i] = d[i] * w[i] * r - x[i] * c;
      }
    partial[omp_get_thread_num()] = std::move(dw);
  }
  for (const std::vector<T>& dw : partial) {
    if (dw.empty()) continue;
    for (int64_t i = 0; i < hd; ++i) {
      dwq[i] += dw[i];
      dwk[i] += dw[hd + i];
    }
  }
}

template <typename T>
void qk_global_sumsq(T* sumsq, const T* qkv, int64_t N, int64_t Hq, int64_t Hkv, int64_t hd) {
  const int64_t S = (Hq + 2 * Hkv) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = qkv + n * S;
    double q = 0, k = 0;
    for (int64_t i = 0; i < Hq * hd; ++i) q += static_cast<double>(x[i]) * x[i];
    for (int64_t i = Hq * hd; i < (Hq + Hkv) * hd; ++i) k += static_cast<double>(x[i]) * x[i];
    sumsq[2 * n] = static_cast<T>(q);
    sumsq[2 * n + 1] = static_cast<T>(k);
  }
}

template <typename T>
void qk_global_rmsnorm_forward(T* qkv, T* raw, T* rstd, const T* sumsq, const T* wq, const T* wk, int64_t N,
                               int64_t Hq, int64_t Hkv, int64_t hd, double dq, double dk, double eps) {
  const int64_t S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, F = (Hq + Hkv) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* x = qkv + n * S;
    const T rq = static_cast<T>(1.0 / std::sqrt(static_cast<double>(sumsq[2 * n]) / dq + eps));
    const T rk = static_cast<T>(1.0 / std::sqrt(static_cast<double>(sumsq[2 * n + 1]) / dk + eps));
    rstd[2 * n] = rq;
    rstd[2 * n + 1] = rk;
    for (int64_t i = 0; i < F; ++i) {
      raw[n * F + i] = x[i];
      x[i] = i < QD ? x[i] * rq * wq[i] : x[i] * rk * wk[i - QD];
    }
  }
}

template <typename T>
void qk_global_rmsnorm_dot(T* dot, const T* dqkv, const T* raw, const T* wq, const T* wk, int64_t N, int64_t Hq,
                           int64_t Hkv, int64_t hd) {
  const int64_t S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, F = (Hq + Hkv) * hd;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* d = dqkv + n * S;
    const T* x = raw + n * F;
    double q = 0, k = 0;
    for (int64_t i = 0; i < QD; ++i) q += static_cast<double>(d[i]) * wq[i] * x[i];
    for (int64_t i = QD; i < F; ++i) k += static_cast<double>(d[i]) * wk[i - QD] * x[i];
    dot[2 * n] = static_cast<T>(q);
    dot[2 * n + 1] = static_cast<T>(k);
  }
}

template <typename T>
void qk_global_rmsnorm_backward(T* dqkv, T* dwq, T* dwk, const T* raw, const T* rstd, const T* dot, const T* wq,
                                const T* wk, int64_t N, int64_t Hq, int64_t Hkv, int64_t hd, double dq, double dk) {
  const int64_t S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, F = (Hq + Hkv) * hd;
  // The scale gradients: each feature's column summed over rows by one thread (fixed order).
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < F; ++i) {
    T acc = 0;
    for (int64_t n = 0; n < N; ++n) acc += dqkv[n * S + i] * raw[n * F + i] * rstd[2 * n + (i < QD ? 0 : 1)];
    if (i < QD) dwq[i] += acc;
    else dwk[i - QD] += acc;
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    T* d = dqkv + n * S;
    const T* x = raw + n * F;
    const T rq = rstd[2 * n], rk = rstd[2 * n + 1];
    const T cq = dot[2 * n] * rq * rq * rq / static_cast<T>(dq), ck = dot[2 * n + 1] * rk * rk * rk / static_cast<T>(dk);
    for (int64_t i = 0; i < F; ++i)
      d[i] = i < QD ? d[i] * wq[i] * rq - x[i] * cq : d[i] * wk[i - QD] * rk - x[i] * ck;
  }
}

// ---------------------------------------------------------------- attention
// Per (batch, query head), as GEMMs on strided views of qkv (row stride S): scores
// Q K^T, the causal softmax row by row, then P V; the backward likewise (dP = dO V^T,
// dV += P^T dO, dS = P (dP - rowsum(P dP)) / sqrt(hd), dQ = dS K, dK += dS^T Q). The
// GEMMs also compute the masked upper triangle (twice the FLOPs of a causal kernel), at
// GEMM speed rather than the few GFLOP/s of row-by-row dot products. The (batch, kv
// head) blocks run in parallel, each GEMM on one thread: hundreds of T x T x hd products
// per layer are too small to share between threads. A kv head's query heads run in
// order inside its block, so dK and dV are summed in a fixed order and by one thread.
namespace {

template <typename T>
void HeadGemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
              int64_t ldb, T beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) GemmF32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else Gemm<T>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Row t of a (Tn, Tn) score matrix: the softmax over keys [lo, t] in place, zeros
// elsewhere (lo = 0: causal; lo > 0: a sliding window).
template <typename T>
void CausalSoftmaxRow(T* p, int64_t lo, int64_t t, int64_t Tn) {
  T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int64_t t2 = lo; t2 <= t; ++t2) mx = std::max(mx, p[t2]);
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t t2 = lo; t2 <= t; ++t2) {
    p[t2] = Exp(p[t2] - mx);
    sum += p[t2];
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t t2 = lo; t2 <= t; ++t2) p[t2] *= inv;
  for (int64_t t2 = 0; t2 < lo; ++t2) p[t2] = 0;
  for (int64_t t2 = t + 1; t2 < Tn; ++t2) p[t2] = 0;
}

// The first key a query at t sees.
inline int64_t WindowStart(int64_t t, int64_t window) { return window > 0 ? std::max<int64_t>(0, t - window + 1) : 0; }

// Scores row [lo, t] -> cap * tanh(s / cap), in place.
template <typename T>
void SoftCapRow(T* s, int64_t lo, int64_t t, double cap) {
  for (int64_t t2 = lo; t2 <= t; ++t2) s[t2] = static_cast<T>(cap * std::tanh(static_cast<double>(s[t2]) / cap));
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int64_t B, int64_t Tn, int64_t Hq, int64_t Hkv, int64_t hd,
                       AttentionOptions opt) {
  const int64_t S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, KD = Hkv * hd, group = Hq / Hkv;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / group;
      const T* q = qkv + b * Tn * S + h * hd;
      const T* k = qkv + b * Tn * S + QD + kh * hd;
      const T* v = qkv + b * Tn * S + QD + KD + kh * hd;
      T* p = att + (b * Hq + h) * Tn * Tn;
      HeadGemm<T>(false, true, Tn, Tn, hd, scale, q, S, k, S, T(0), p, Tn);
      for (int64_t t = 0; t < Tn; ++t) {
        const int64_t lo = WindowStart(t, opt.window);
        if (opt.soft_cap > 0) SoftCapRow(p + t * Tn, lo, t, opt.soft_cap);
        CausalSoftmaxRow(p + t * Tn, lo, t, Tn);
      }
      HeadGemm<T>(false, false, Tn, hd, Tn, T(1), p, Tn, v, S, T(0), out + b * Tn * QD + h * hd, QD);
    }
}

template <typename T>
void attention_cached_forward(T* out, T* att, const T* qkv, const T* kc, const T* vc, int64_t n, int64_t pos,
                              int64_t Hq, int64_t Hkv, int64_t hd, AttentionOptions opt) {
  const int64_t S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, KD = Hkv * hd, group = Hq / Hkv, ctx = pos + n;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < Hq; ++h) {
    const int64_t kh = h / group;
    T* p = att + h * n * ctx;
    HeadGemm<T>(false, true, n, ctx, hd, scale, qkv + h * hd, S, kc + kh * hd, KD, T(0), p, ctx);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = pos + i, lo = WindowStart(t, opt.window);
      if (opt.soft_cap > 0) SoftCapRow(p + i * ctx, lo, t, opt.soft_cap);
      CausalSoftmaxRow(p + i * ctx, lo, t, ctx);
    }
    HeadGemm<T>(false, false, n, hd, ctx, T(1), p, ctx, vc + kh * hd, KD, T(0), out + h * hd, QD);
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int64_t B, int64_t Tn, int64_t Hq,
                        int64_t Hkv, int64_t hd, AttentionOptions opt) {
  const int64_t S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, KD = Hkv * hd, group = Hq / Hkv;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::memset(dqkv, 0, sizeof(T) * B * Tn * S);
#pragma omp parallel
  {
    std::vector<T> ds(Tn * Tn);
    std::vector<T> capped(opt.soft_cap > 0 ? Tn * Tn : 0);  // the capped scores, recomputed
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kh = 0; kh < Hkv; ++kh)
        for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
          const int64_t row0 = b * Tn * S;
          const T* q = qkv + row0 + h * hd;
          const T* k = qkv + row0 + QD + kh * hd;
          const T* v = qkv + row0 + QD + KD + kh * hd;
          T* dq = dqkv + row0 + h * hd;
          T* dk = dqkv + row0 + QD + kh * hd;
          T* dv = dqkv + row0 + QD + KD + kh * hd;
          const T* p = att + (b * Hq + h) * Tn * Tn;
          const T* dy = dout + b * Tn * QD + h * hd;
          HeadGemm<T>(false, true, Tn, Tn, hd, T(1), dy, QD, v, S, T(0), ds.data(), Tn);  // dP
          HeadGemm<T>(true, false, Tn, hd, Tn, T(1), p, Tn, dy, QD, T(1), dv, S);        // dV += P^T dO
          if (opt.soft_cap > 0) HeadGemm<T>(false, true, Tn, Tn, hd, scale, q, S, k, S, T(0), capped.data(), Tn);
          for (int64_t t = 0; t < Tn; ++t) {
            const T* pr = p + t * Tn;
            T* d = ds.data() + t * Tn;
            const int64_t lo = WindowStart(t, opt.window);
            T sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int64_t t2 = lo; t2 <= t; ++t2) sum += pr[t2] * d[t2];
#pragma omp simd
            for (int64_t t2 = lo; t2 <= t; ++t2) d[t2] = pr[t2] * (d[t2] - sum) * scale;
            if (opt.soft_cap > 0) {  // d tanh(s/cap)*cap / ds = 1 - tanh^2
              T* c = capped.data() + t * Tn;
              SoftCapRow(c, lo, t, opt.soft_cap);
              for (int64_t t2 = lo; t2 <= t; ++t2) {
                const T th = c[t2] / static_cast<T>(opt.soft_cap);
                d[t2] *= T(1) - th * th;
              }
            }
            for (int64_t t2 = 0; t2 < lo; ++t2) d[t2] = 0;
            for (int64_t t2 = t + 1; t2 < Tn; ++t2) d[t2] = 0;
          }
          HeadGemm<T>(false, false, Tn, hd, Tn, T(1), ds.data(), Tn, k, S, T(1), dq, S);  // dQ = dS K
          HeadGemm<T>(true, false, Tn, hd, Tn, T(1), ds.data(), Tn, q, S, T(1), dk, S);   // dK += dS^T Q
        }
  }
}

// ---------------------------------------------------------------- SwiGLU / GELU / residual
template <typename T>
void swiglu_forward(T* out, const T* gu, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* g = gu + n * 2 * F;
    const T* u = g + F;
    T* o = out + n * F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) {
      T sig = T(1) / (T(1) + Exp(-g[j]));
      o[j] = g[j] * sig * u[j];
    }
  }
}

template <typename T>
void swiglu_backward(T* dgu, const T* dout, const T* gu, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* g = gu + n * 2 * F;
    const T* u = g + F;
    const T* dy = dout + n * F;
    T* dg = dgu + n * 2 * F;
    T* du = dg + F;
#pragma omp simd
    for (int64_t j = 0; j < F; ++j) {
      T sig = T(1) / (T(1) + Exp(-g[j]));
      T silu = g[j] * sig;
      du[j] = dy[j] * silu;
      dg[j] = dy[j] * u[j] * sig * (T(1) + g[j] * (T(1) - sig));
    }
  }
}

namespace {
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)

// gelu(x) (tanh form) and its derivative, in double: the GeGLU kernels' scalar core.
inline void GeluAndDerivative(double x, double* y, double* dy) {
  const double u = kGeluC * (x + 0.044715 * x * x * x);
  const double du = kGeluC * (1 + 3 * 0.044715 * x * x);
  const double th = std::tanh(u);
  *y = 0.5 * x * (1 + th);
  *dy = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * du;
}
}  // namespace

template <typename T>
void geglu_forward(T* out, const T* gu, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* g = gu + n * 2 * F;
    const T* u = g + F;
    T* o = out + n * F;
    for (int64_t j = 0; j < F; ++j) {
      double y, dy;
      GeluAndDerivative(g[j], &y, &dy);
      o[j] = static_cast<T>(y * u[j]);
    }
  }
}

template <typename T>
void geglu_backward(T* dgu, const T* dout, const T* gu, int64_t N, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* g = gu + n * 2 * F;
    const T* u = g + F;
    const T* d = dout + n * F;
    T* dg = dgu + n * 2 * F;
    T* du = dg + F;
    for (int64_t j = 0; j < F; ++j) {
      double y, dy;
      GeluAndDerivative(g[j], &y, &dy);
      du[j] = static_cast<T>(d[j] * y);
      dg[j] = static_cast<T>(d[j] * u[j] * dy);
    }
  }
}

// GELU (tanh form): 0.5 x (1 + tanh u) = x sigmoid(2u). The float kernels compute it as
// e = exp(2u), sigmoid = e / (e + 1), sech^2 u = 4 e / (e + 1)^2 with the vectorised exp
// (kernels/vec_math.h): no scalar tanhf call, and no 1 - tanh^2 cancellation where |u|
// is large. The double kernels (gradient checks) keep libm's tanh.
template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T x = inp[i];
    T u = static_cast<T>(kGeluC) * (x + T(0.044715) * x * x * x);
    if constexpr (std::is_same_v<T, float>) {
      const float e = ExpF(std::min(std::max(2.f * u, -80.f), 80.f));
      out[i] = x * (e / (e + 1.f));
    } else {
      out[i] = T(0.5) * x * (T(1) + std::tanh(u));
    }
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T x = inp[i];
    T u = static_cast<T>(kGeluC) * (x + T(0.044715) * x * x * x);
    T du = static_cast<T>(kGeluC) * (T(1) + T(3 * 0.044715) * x * x);
    if constexpr (std::is_same_v<T, float>) {
      const float e = ExpF(std::min(std::max(2.f * u, -80.f), 80.f));
      const float s = 1.f / (e + 1.f), sig = e * s;  // 0.5 (1 + tanh u), and sech^2 u = 4 sig s
      dinp[i] = dout[i] * (sig + 2.f * x * sig * s * du);
    } else {
      T th = std::tanh(u);
      T sech2 = T(1) - th * th;
      dinp[i] = dout[i] * (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du);
    }
  }
}

template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void scale_inplace(T* x, T s, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

// ---------------------------------------------------------------- cross-entropy
namespace {
// One row with a soft cap and/or z-loss, in double: x (V) raw logits, d (V, may alias x
// or be null) the gradient w.r.t. them. Returns the row's loss.
template <typename T>
double CrossEntropyRowGeneral(T* d, const T* x, int32_t tgt, int64_t V, double dloss, const LossOptions& o,
                              std::vector<double>& xs) {
  xs.resize(static_cast<size_t>(V));
  double mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) {
    xs[v] = o.soft_cap > 0 ? o.soft_cap * std::tanh(static_cast<double>(x[v]) / o.soft_cap) : static_cast<double>(x[v]);
    mx = std::max(mx, xs[v]);
  }
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(xs[v] - mx);
  const double lse = std::log(sum) + mx;
  if (d) {
    // d loss / d xs = softmax * (1 + 2 z lse) - onehot; times d xs / d x = 1 - tanh^2.
    const double zf = 1 + 2 * o.z_loss * lse;
    for (int64_t v = 0; v < V; ++v) {
      double g = std::exp(xs[v] - lse) * zf - (v == tgt ? 1.0 : 0.0);
      if (o.soft_cap > 0) {
        const double th = xs[v] / o.soft_cap;
        g *= 1 - th * th;
      }
      d[v] = static_cast<T>(g * dloss);
    }
  }
  return lse - xs[tgt] + o.z_loss * lse * lse;
}
}  // namespace

template <typename T>
void crossentropy_forward_backward(T* losses, T* dlogits, const T* logits, const int32_t* targets, int64_t N,
                                   int64_t V, T dloss, LossOptions opt) {
  if (opt.z_loss != 0 || opt.soft_cap > 0) {
#pragma omp parallel
    {
      std::vector<double> xs;
#pragma omp for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        if (targets[n] < 0) {
          losses[n] = 0;
          if (dlogits) std::memset(dlogits + n * V, 0, sizeof(T) * V);
          continue;
        }
        losses[n] = static_cast<T>(CrossEntropyRowGeneral(dlogits ? dlogits + n * V : static_cast<T*>(nullptr),
                                                          logits + n * V, targets[n], V, dloss, opt, xs));
      }
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * V;
    const int32_t tgt = targets[n];
    T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, x[v]);
    if (tgt < 0) {
      losses[n] = 0;
      if (dlogits) std::memset(dlogits + n * V, 0, sizeof(T) * V);
      continue;
    }
    const T x_tgt = x[tgt];
    if constexpr (std::is_same_v<T, float>) {
      // One exp per logit: e = exp(x - max), kept in dlogits (x may alias it) while
      // summing in double, then scaled by dloss / sum.
      T* e = dlogits ? dlogits + n * V : nullptr;
      double sum = 0;
      if (e) {
#pragma omp simd reduction(+ : sum)
        for (int64_t v = 0; v < V; ++v) {
          e[v] = ExpF(x[v] - mx);
          sum += e[v];
        }
      } else {
#pragma omp simd reduction(+ : sum)
        for (int64_t v = 0; v < V; ++v) sum += ExpF(x[v] - mx);
      }
      losses[n] = static_cast<T>(std::log(sum) + mx - x_tgt);
      if (e) {
        const T s = static_cast<T>(dloss / sum);
#pragma omp simd
        for (int64_t v = 0; v < V; ++v) e[v] *= s;
        e[tgt] -= dloss;
      }
    } else {
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(x[v] - mx));
      double lse = std::log(sum) + mx;
      losses[n] = static_cast<T>(lse - x_tgt);
      if (dlogits) {
        T* d = dlogits + n * V;
        const T shift = static_cast<T>(lse);
        for (int64_t v = 0; v < V; ++v) d[v] = std::exp(x[v] - shift) * dloss;  // x may alias d
        d[tgt] -= dloss;
      }
    }
  }
}

// ---------------------------------------------------------------- instantiations
#define ELASTRAIN_INSTANTIATE(T)                                                                              \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int64_t, int64_t, int64_t);     \
  template void embedding_backward<T>(T*, T*, const T*, const int32_t*, int64_t, int64_t, int64_t);          \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);                    \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t);       \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, double);    \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t, \
                                      int64_t);                                                              \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);              \
  template void matmul_backward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);     \
  template void rope_table<T>(T*, int64_t, int64_t, double, bool);                                           \
  template void rope_forward<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t);                  \
  template void rope_backward<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t);                 \
  template void qk_rmsnorm_forward<T>(T*, T*, T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t,     \
                                      double);                                                               \
  template void qk_rmsnorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t,  \
                                       int64_t, int64_t);                                                    \
  template void qk_global_sumsq<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t);                        \
  template void qk_global_rmsnorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t,       \
                                             int64_t, int64_t, double, double, double);                       \
  template void qk_global_rmsnorm_dot<T>(T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, \
                                         int64_t);                                                             \
  template void qk_global_rmsnorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*,    \
                                              int64_t, int64_t, int64_t, int64_t, double, double);             \
  template void attention_forward<T>(T*, T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t,           \
                                     AttentionOptions);                                                      \
  template void attention_cached_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,   \
                                            int64_t, int64_t, AttentionOptions);                            \
  template void attention_backward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t,  \
                                      int64_t, AttentionOptions);                                            \
  template void geglu_forward<T>(T*, const T*, int64_t, int64_t);                                            \
  template void geglu_backward<T>(T*, const T*, const T*, int64_t, int64_t);                                 \
  template void scale_inplace<T>(T*, T, int64_t);                                                            \
  template void swiglu_forward<T>(T*, const T*, int64_t, int64_t);                                           \
  template void swiglu_backward<T>(T*, const T*, const T*, int64_t, int64_t);                                \
  template void gelu_forward<T>(T*, const T*, int64_t);                                                      \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);                                           \
  template void residual_forward<T>(T*, const T*, const T*, int64_t);                                        \
  template void crossentropy_forward_backward<T>(T*, T*, const T*, const int32_t*, int64_t, int64_t, T,      \
                                                 LossOptions);

ELASTRAIN_INSTANTIATE(float)
ELASTRAIN_INSTANTIATE(double)

}  // namespace elastrain::kernels
