#include "kernels/reference.h"

#include <cmath>

namespace elastrain::kernels::reference {

Vec embedding(const std::vector<int32_t>& tokens, const Vec& wte, const Vec* wpe, int64_t B, int64_t T, int64_t C) {
  Vec out(B * T * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        out[(b * T + t) * C + c] = wte[tokens[b * T + t] * C + c] + (wpe ? (*wpe)[t * C + c] : 0.0);
  return out;
}

Vec rmsnorm(const Vec& inp, const Vec& weight, int64_t N, int64_t C, double eps) {
  Vec out(N * C);
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += inp[n * C + c] * inp[n * C + c] / C;
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = inp[n * C + c] / std::sqrt(ms + eps) * weight[c];
  }
  return out;
}

Vec layernorm(const Vec& inp, const Vec& weight, const Vec& bias, int64_t N, int64_t C, double eps) {
  Vec out(N * C);
  for (int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += inp[n * C + c] / C;
    for (int64_t c = 0; c < C; ++c) v += (inp[n * C + c] - m) * (inp[n * C + c] - m) / C;
    for (int64_t c = 0; c < C; ++c)
      out[n * C + c] = (inp[n * C + c] - m) / std::sqrt(v + eps) * weight[c] + bias[c];
  }
  return out;
}

Vec matmul(const Vec& inp, const Vec& weight, const Vec* bias, int64_t N, int64_t C, int64_t OC) {
  Vec out(N * OC);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t c = 0; c < C; ++c) s += inp[n * C + c] * weight[o * C + c];
      out[n * OC + o] = s;
    }
  return out;
}

Vec rope(const Vec& qkv, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t hd, double theta) {
  Vec out = qkv;
  const int64_t S = (Hq + 2 * Hkv) * hd;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < Hq + Hkv; ++h)
        for (int64_t i = 0; i < hd / 2; ++i) {
          double a = t * std::pow(theta, -2.0 * i / hd);
          int64_t at = (b * T + t) * S + h * hd + 2 * i;
          out[at] = qkv[at] * std::cos(a) - qkv[at + 1] * std::sin(a);
          out[at + 1] = qkv[at] * std::sin(a) + qkv[at + 1] * std::cos(a);
        }
  return out;
}

Vec attention(const Vec& qkv, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t hd) {
  const int64_t S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, KD = Hkv * hd;
  Vec out(B * T * QD, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t kh = h / (Hq / Hkv);
      for (int64_t t = 0; t < T; ++t) {
        Vec score(T);
        double mx = -1e300;
        for (int64_t t2 = 0; t2 < T; ++t2) {
          double s = 0;
          for (int64_t i = 0; i < hd; ++i) s += qkv[(b * T + t) * S + h * hd + i] * qkv[(b * T + t2) * S + QD + kh * hd + i];
          score[t2] = t2 <= t ? s / std::sqrt(double(hd)) : -INFINITY;  // causal mask
          if (t2 <= t && score[t2] > mx) mx = score[t2];
        }
        double z = 0;
        for (int64_t t2 = 0; t2 < T; ++t2) z += std::exp(score[t2] - mx);
        for (int64_t t2 = 0; t2 < T; ++t2) {
          double p = std::exp(score[t2] - mx) / z;
          for (int64_t i = 0; i < hd; ++i)
            out[(b * T + t) * QD + h * hd + i] += p * qkv[(b * T + t2) * S + QD + KD + kh * hd + i];
        }
      }
    }
  return out;
}

Vec swiglu(const Vec& gu, int64_t N, int64_t F) {
  Vec out(N * F);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < F; ++j) {
      double g = gu[n * 2 * F + j], u = gu[n * 2 * F + F + j];
      out[n * F + j] = g / (1.0 + std::exp(-g)) * u;
    }
  return out;
}

Vec gelu(const Vec& inp) {
  Vec out(inp.size());
  for (size_t i = 0; i < inp.size(); ++i) {
    double x = inp[i];
    out[i] = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return out;
}

Vec crossentropy(const Vec& logits, const std::vector<int32_t>& targets, int64_t N, int64_t V) {
  Vec out(N, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(logits[n * V + v]);
    out[n] = std::log(z) - logits[n * V + targets[n]];
  }
  return out;
}

}  // namespace elastrain::kernels::reference
