// Kernel tests: each fast forward kernel against its naive reference (kernels/reference.h),
// and each backward kernel against central finite differences in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace elastrain {
namespace {

namespace k = kernels;
namespace ref = kernels::reference;
using Vec = std::vector<double>;

Vec Random(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Compares analytic gradient `grad` of loss() w.r.t. x with central differences.
// The tolerance is tight enough that a wrong sign or a missing term fails.
void ExpectGradMatches(Vec& x, const Vec& grad, const std::function<double()>& loss, const char* what,
                       double tol = 1e-6) {
  ASSERT_EQ(x.size(), grad.size());
  const double h = 1e-5;
  double max_err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double old = x[i];
    x[i] = old + h;
    double lp = loss();
    x[i] = old - h;
    double lm = loss();
    x[i] = old;
    double num = (lp - lm) / (2 * h);
    double err = std::abs(num - grad[i]) / std::max(1.0, std::abs(num));
    max_err = std::max(max_err, err);
    ASSERT_LT(err, tol) << what << " element " << i << ": analytic " << grad[i] << " numeric " << num;
  }
  EXPECT_LT(max_err, tol) << what;
}

void ExpectNear(const std::vector<float>& fast, const Vec& slow, double tol, const char* what) {
  ASSERT_EQ(fast.size(), slow.size());
  for (size_t i = 0; i < fast.size(); ++i)
    ASSERT_NEAR(fast[i], slow[i], tol * std::max(1.0, std::abs(slow[i]))) << what << " element " << i;
}

std::vector<float> ToFloat(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

TEST(KernelsTest, GemmMatchesReferenceAllTransposes) {
  for (auto backend : {GemmBackend::kOneDnn, GemmBackend::kOpenBlas}) {
    SetGemmBackend(backend);
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const int64_t M = 37, N = 23, K = 19;
        auto a = ToFloat(Random(M * K, 1)), b = ToFloat(Random(K * N, 2)), c = ToFloat(Random(M * N, 3));
        auto c_ref = c;
        Gemm<float>(ta, tb, M, N, K, 0.5f, a.data(), ta ? M : K, b.data(), tb ? K : N, 1.f, c.data(), N);
        GemmReference<float>(ta, tb, M, N, K, 0.5f, a.data(), ta ? M : K, b.data(), tb ? K : N, 1.f, c_ref.data(), N);
        for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(c[i], c_ref[i], 1e-4) << "ta=" << ta << " tb=" << tb;
      }
  }
  SetGemmBackend(GemmBackend::kOneDnn);
}

TEST(KernelsTest, MatmulForwardAndGradient) {
  const int64_t N = 5, C = 4, OC = 3;
  Vec x = Random(N * C, 1), w = Random(OC * C, 2), b = Random(OC, 3), r = Random(N * OC, 4);
  std::vector<float> out(N * OC);
  auto xf = ToFloat(x), wf = ToFloat(w), bf = ToFloat(b);
  k::matmul_forward(out.data(), xf.data(), wf.data(), bf.data(), N, C, OC);
  ExpectNear(out, ref::matmul(x, w, &b, N, C, OC), 1e-5, "matmul");
  Vec dx(N * C, 0), dw(OC * C, 0), db(OC, 0);
  k::matmul_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), N, C, OC);
  auto loss = [&] { return Dot(r, ref::matmul(x, w, &b, N, C, OC)); };
  ExpectGradMatches(x, dx, loss, "matmul dinp");
  ExpectGradMatches(w, dw, loss, "matmul dweight");
  ExpectGradMatches(b, db, loss, "matmul dbias");
}

TEST(KernelsTest, RmsnormForwardAndGradient) {
  const int64_t N = 4, C = 8;
  Vec x = Random(N * C, 5), w = Random(C, 6), r = Random(N * C, 7);
  Vec out(N * C), rstd(N), dx(N * C, 0), dw(C, 0);
  k::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
  ExpectNear(ToFloat(out), ref::rmsnorm(x, w, N, C, 1e-5), 1e-6, "rmsnorm");
  k::rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
  auto loss = [&] { return Dot(r, ref::rmsnorm(x, w, N, C, 1e-5)); };
  ExpectGradMatches(x, dx, loss, "rmsnorm dinp");
  ExpectGradMatches(w, dw, loss, "rmsnorm dweight");
}

TEST(KernelsTest, LayernormForwardAndGradient) {
  const int64_t N = 4, C = 8;
  Vec x = Random(N * C, 8), w = Random(C, 9), b = Random(C, 10), r = Random(N * C, 11);
  Vec out(N * C), mean(N), rstd(N), dx(N * C, 0), dw(C, 0), db(C, 0);
  k::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5);
  ExpectNear(ToFloat(out), ref::layernorm(x, w, b, N, C, 1e-5), 1e-6, "layernorm");
  k::layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  auto loss = [&] { return Dot(r, ref::layernorm(x, w, b, N, C, 1e-5)); };
  ExpectGradMatches(x, dx, loss, "layernorm dinp");
  ExpectGradMatches(w, dw, loss, "layernorm dweight");
  ExpectGradMatches(b, db, loss, "layernorm dbias");
}

TEST(KernelsTest, RopeForwardAndGradient) {
  const int64_t B = 2, T = 5, Hq = 4, Hkv = 2, hd = 6, S = (Hq + 2 * Hkv) * hd;
  Vec qkv = Random(B * T * S, 12), r = Random(B * T * S, 13);
  Vec table(T * hd);
  k::rope_table(table.data(), T, hd, 10000.0);
  Vec fast = qkv;
  k::rope_forward(fast.data(), table.data(), B, T, Hq, Hkv, hd);
  ExpectNear(ToFloat(fast), ref::rope(qkv, B, T, Hq, Hkv, hd, 10000.0), 1e-6, "rope");
  Vec d = r;
  k::rope_backward(d.data(), table.data(), B, T, Hq, Hkv, hd);
  ExpectGradMatches(qkv, d, [&] { return Dot(r, ref::rope(qkv, B, T, Hq, Hkv, hd, 10000.0)); }, "rope");
}

TEST(KernelsTest, AttentionForwardAndGradientGroupedQuery) {
  for (int64_t Hkv : {1, 2, 4}) {
    const int64_t B = 2, T = 6, Hq = 4, hd = 3, S = (Hq + 2 * Hkv) * hd;
    Vec qkv = Random(B * T * S, 14 + Hkv), r = Random(B * T * Hq * hd, 15);
    Vec out(B * T * Hq * hd), att(B * Hq * T * T), dqkv(B * T * S);
    k::attention_forward(out.data(), att.data(), qkv.data(), B, T, Hq, Hkv, hd);
    ExpectNear(ToFloat(out), ref::attention(qkv, B, T, Hq, Hkv, hd), 1e-6, "attention");
    k::attention_backward(dqkv.data(), r.data(), qkv.data(), att.data(), B, T, Hq, Hkv, hd);
    ExpectGradMatches(qkv, dqkv, [&] { return Dot(r, ref::attention(qkv, B, T, Hq, Hkv, hd)); }, "attention");
  }
}

TEST(KernelsTest, SwigluForwardAndGradient) {
  const int64_t N = 3, F = 5;
  Vec gu = Random(N * 2 * F, 16), r = Random(N * F, 17), out(N * F), d(N * 2 * F);
  k::swiglu_forward(out.data(), gu.data(), N, F);
  ExpectNear(ToFloat(out), ref::swiglu(gu, N, F), 1e-6, "swiglu");
  k::swiglu_backward(d.data(), r.data(), gu.data(), N, F);
  ExpectGradMatches(gu, d, [&] { return Dot(r, ref::swiglu(gu, N, F)); }, "swiglu");
}

TEST(KernelsTest, GeluForwardAndGradient) {
  Vec x = Random(20, 18, 2.0), r = Random(20, 19), out(20), d(20);
  k::gelu_forward(out.data(), x.data(), 20);
  ExpectNear(ToFloat(out), ref::gelu(x), 1e-6, "gelu");
  k::gelu_backward(d.data(), x.data(), r.data(), 20);
  ExpectGradMatches(x, d, [&] { return Dot(r, ref::gelu(x)); }, "gelu");
}

TEST(KernelsTest, CrossEntropyForwardAndGradientWithMask) {
  const int64_t N = 4, V = 7;
  Vec logits = Random(N * V, 20, 3.0), losses(N), d(N * V);
  std::vector<int32_t> targets = {3, 0, -1, 6};
  k::crossentropy_forward_backward(losses.data(), d.data(), logits.data(), targets.data(), N, V, 1.0);
  ExpectNear(ToFloat(losses), ref::crossentropy(logits, targets, N, V), 1e-6, "crossentropy");
  EXPECT_EQ(losses[2], 0.0);
  auto loss = [&] {
    double s = 0;
    for (double l : ref::crossentropy(logits, targets, N, V)) s += l;
    return s;
  };
  ExpectGradMatches(logits, d, loss, "crossentropy");
  // In place (dlogits aliasing logits) gives the same gradient.
  Vec inplace = logits;
  k::crossentropy_forward_backward(losses.data(), inplace.data(), inplace.data(), targets.data(), N, V, 1.0);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_DOUBLE_EQ(inplace[i], d[i]);
}

// ---- the decoder families' kernels: naive forms written here, the fast kernels against
// them, their backward against finite differences, and the float kernels against double.

// Attention with a sliding window and a soft cap, one loop per score.
Vec NaiveAttention(const Vec& qkv, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t hd, int64_t window,
                   double cap) {
  const int64_t S = (Hq + 2 * Hkv) * hd;
  Vec out(B * T * Hq * hd, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / (Hq / Hkv);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(T, -INFINITY);
        double mx = -INFINITY;
        for (int64_t u = 0; u <= t; ++u) {
          if (window > 0 && t - u >= window) continue;
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i)
            dot += qkv[(b * T + t) * S + h * hd + i] * qkv[(b * T + u) * S + Hq * hd + kh * hd + i];
          dot /= std::sqrt(static_cast<double>(hd));
          s[u] = cap > 0 ? cap * std::tanh(dot / cap) : dot;
          mx = std::max(mx, s[u]);
        }
        double z = 0;
        for (int64_t u = 0; u <= t; ++u) z += s[u] == -INFINITY ? 0 : std::exp(s[u] - mx);
        for (int64_t u = 0; u <= t; ++u) {
          if (s[u] == -INFINITY) continue;
          const double p = std::exp(s[u] - mx) / z;
          for (int64_t i = 0; i < hd; ++i)
            out[(b * T + t) * Hq * hd + h * hd + i] += p * qkv[(b * T + u) * S + (Hq + Hkv) * hd + kh * hd + i];
        }
      }
    }
  return out;
}

TEST(KernelsTest, AttentionWindowAndSoftCapForwardAndGradient) {
  for (auto [window, cap] : {std::pair<int64_t, double>{2, 0.0}, {0, 0.7}, {3, 0.5}}) {
    const int64_t B = 2, T = 6, Hq = 4, Hkv = 2, hd = 3, S = (Hq + 2 * Hkv) * hd;
    const k::AttentionOptions opt{window, cap};
    Vec qkv = Random(B * T * S, 40 + window), r = Random(B * T * Hq * hd, 41);
    Vec out(B * T * Hq * hd), att(B * Hq * T * T), dqkv(B * T * S);
    k::attention_forward(out.data(), att.data(), qkv.data(), B, T, Hq, Hkv, hd, opt);
    ExpectNear(ToFloat(out), NaiveAttention(qkv, B, T, Hq, Hkv, hd, window, cap), 1e-6, "windowed attention");
    k::attention_backward(dqkv.data(), r.data(), qkv.data(), att.data(), B, T, Hq, Hkv, hd, opt);
    ExpectGradMatches(qkv, dqkv, [&] { return Dot(r, NaiveAttention(qkv, B, T, Hq, Hkv, hd, window, cap)); },
                      "windowed attention");
    // float kernels agree with double
    std::vector<float> qf(qkv.begin(), qkv.end()), of(out.size()), af(att.size()), rf(r.begin(), r.end()),
        df(dqkv.size());
    k::attention_forward(of.data(), af.data(), qf.data(), B, T, Hq, Hkv, hd, opt);
    k::attention_backward(df.data(), rf.data(), qf.data(), af.data(), B, T, Hq, Hkv, hd, opt);
    ExpectNear(of, out, 1e-5, "float windowed attention");
    ExpectNear(df, dqkv, 1e-4, "float windowed attention backward");
  }
}

Vec NaiveQkNorm(const Vec& qkv, const Vec& wq, const Vec& wk, int64_t N, int64_t Hq, int64_t Hkv, int64_t hd,
                double eps) {
  const int64_t S = (Hq + 2 * Hkv) * hd;
  Vec out = qkv;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < Hq + Hkv; ++h) {
      double ss = 0;
      for (int64_t i = 0; i < hd; ++i) ss += qkv[n * S + h * hd + i] * qkv[n * S + h * hd + i];
      const double r = 1 / std::sqrt(ss / hd + eps);
      for (int64_t i = 0; i < hd; ++i) out[n * S + h * hd + i] = qkv[n * S + h * hd + i] * r * (h < Hq ? wq : wk)[i];
    }
  return out;
}

TEST(KernelsTest, QkNormForwardAndGradient) {
  const int64_t N = 5, Hq = 4, Hkv = 2, hd = 6, S = (Hq + 2 * Hkv) * hd;
  Vec qkv = Random(N * S, 42), wq = Random(hd, 43), wk = Random(hd, 44), r = Random(N * S, 45);
  Vec fwd = qkv, raw(N * (Hq + Hkv) * hd), rstd(N * (Hq + Hkv)), dwq(hd, 0), dwk(hd, 0);
  k::qk_rmsnorm_forward(fwd.data(), raw.data(), rstd.data(), wq.data(), wk.data(), N, Hq, Hkv, hd, 1e-6);
  ExpectNear(ToFloat(fwd), NaiveQkNorm(qkv, wq, wk, N, Hq, Hkv, hd, 1e-6), 1e-6, "qk norm");
  Vec d = r;
  k::qk_rmsnorm_backward(d.data(), dwq.data(), dwk.data(), raw.data(), rstd.data(), wq.data(), wk.data(), N, Hq, Hkv,
                         hd);
  // v heads pass through untouched; the gradient check sees them as identity.
  auto loss = [&] { return Dot(r, NaiveQkNorm(qkv, wq, wk, N, Hq, Hkv, hd, 1e-6)); };
  ExpectGradMatches(qkv, d, loss, "qk norm dinp");
  ExpectGradMatches(wq, dwq, loss, "qk norm dwq");
  ExpectGradMatches(wk, dwk, loss, "qk norm dwk");
}

// The all-heads QK norm (olmo3), its phases run as one process runs them.
TEST(KernelsTest, QkNormOverAllHeadsForwardAndGradient) {
  const int64_t N = 4, Hq = 4, Hkv = 2, hd = 3, S = (Hq + 2 * Hkv) * hd, QD = Hq * hd, KD = Hkv * hd;
  Vec qkv = Random(N * S, 50), wq = Random(QD, 51), wk = Random(KD, 52), r = Random(N * S, 53);
  auto naive = [&] {
    Vec out = qkv;
    for (int64_t n = 0; n < N; ++n)
      for (auto [begin, count, w] : {std::tuple<int64_t, int64_t, const Vec*>{0, QD, &wq}, {QD, KD, &wk}}) {
        double ss = 0;
        for (int64_t i = 0; i < count; ++i) ss += qkv[n * S + begin + i] * qkv[n * S + begin + i];
        const double rs = 1 / std::sqrt(ss / count + 1e-6);
        for (int64_t i = 0; i < count; ++i) out[n * S + begin + i] = qkv[n * S + begin + i] * rs * (*w)[i];
      }
    return out;
  };
  Vec fwd = qkv, raw(N * (Hq + Hkv) * hd), rstd(2 * N), stats(2 * N), dwq(QD, 0), dwk(KD, 0);
  k::qk_global_sumsq(stats.data(), fwd.data(), N, Hq, Hkv, hd);
  k::qk_global_rmsnorm_forward(fwd.data(), raw.data(), rstd.data(), stats.data(), wq.data(), wk.data(), N, Hq, Hkv, hd,
                               QD, KD, 1e-6);
  ExpectNear(ToFloat(fwd), naive(), 1e-6, "all-heads qk norm");
  Vec d = r;
  k::qk_global_rmsnorm_dot(stats.data(), d.data(), raw.data(), wq.data(), wk.data(), N, Hq, Hkv, hd);
  k::qk_global_rmsnorm_backward(d.data(), dwq.data(), dwk.data(), raw.data(), rstd.data(), stats.data(), wq.data(),
                                wk.data(), N, Hq, Hkv, hd, QD, KD);
  auto loss = [&] { return Dot(r, naive()); };
  ExpectGradMatches(qkv, d, loss, "all-heads qk norm dinp");
  ExpectGradMatches(wq, dwq, loss, "all-heads qk norm dwq");
  ExpectGradMatches(wk, dwk, loss, "all-heads qk norm dwk");
}

TEST(KernelsTest, GegluForwardAndGradient) {
  const int64_t N = 3, F = 5;
  Vec gu = Random(N * 2 * F, 46, 2.0), r = Random(N * F, 47), out(N * F), d(N * 2 * F);
  auto naive = [&] {
    Vec o(N * F);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < F; ++j) o[n * F + j] = ref::gelu(Vec{gu[n * 2 * F + j]})[0] * gu[n * 2 * F + F + j];
    return o;
  };
  k::geglu_forward(out.data(), gu.data(), N, F);
  ExpectNear(ToFloat(out), naive(), 1e-6, "geglu");
  k::geglu_backward(d.data(), r.data(), gu.data(), N, F);
  ExpectGradMatches(gu, d, [&] { return Dot(r, naive()); }, "geglu");
}

TEST(KernelsTest, CrossEntropyZLossAndSoftCapForwardAndGradient) {
  const int64_t N = 4, V = 7;
  const double z = 0.1, cap = 2.0;
  Vec logits = Random(N * V, 48, 3.0), losses(N), d(N * V);
  std::vector<int32_t> targets = {3, 0, -1, 6};
  auto naive = [&] {
    double total = 0;
    for (int64_t n = 0; n < N; ++n) {
      if (targets[n] < 0) continue;
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(cap * std::tanh(logits[n * V + v] / cap));
      const double lse = std::log(s);
      total += lse - cap * std::tanh(logits[n * V + targets[n]] / cap) + z * lse * lse;
    }
    return total;
  };
  k::crossentropy_forward_backward(losses.data(), d.data(), logits.data(), targets.data(), N, V, 1.0,
                                   k::LossOptions{z, cap});
  EXPECT_NEAR(losses[0] + losses[1] + losses[2] + losses[3], naive(), 1e-12);
  EXPECT_EQ(losses[2], 0.0);
  ExpectGradMatches(logits, d, naive, "crossentropy with z-loss and soft cap");
  std::vector<float> lf(logits.begin(), logits.end()), lossf(N), df(N * V);
  k::crossentropy_forward_backward(lossf.data(), df.data(), lf.data(), targets.data(), N, V, 1.f,
                                   k::LossOptions{z, cap});
  ExpectNear(lossf, losses, 1e-5, "float crossentropy with z-loss and soft cap");
  ExpectNear(df, d, 1e-5, "float crossentropy gradient with z-loss and soft cap");
}

TEST(KernelsTest, Llama31RopeScalingKeepsHighAndDividesLowFrequencies) {
  // hd 16, theta 500000: pair 0 (wavelength 2 pi) is kept, pair 7 (wavelength ~
  // 2 pi * 500000^(7/8) > 8192) is divided by 8, pair 4 (~4443 tokens) is interpolated.
  const int64_t T = 2, hd = 16;
  Vec plain(T * hd), scaled(T * hd);
  k::rope_table(plain.data(), T, hd, 500000.0, false);
  k::rope_table(scaled.data(), T, hd, 500000.0, true);
  auto angle = [&](const Vec& t, int64_t i) { return std::atan2(t[(hd / 2 + i) * 2 + 1], t[(hd / 2 + i) * 2]); };
  EXPECT_DOUBLE_EQ(angle(scaled, 0), angle(plain, 0));
  EXPECT_NEAR(angle(scaled, 7), angle(plain, 7) / 8, 1e-15);
  const double f4 = std::pow(500000.0, -8.0 / 16), smooth = (8192 / (2 * M_PI / f4) - 1) / 3;
  EXPECT_NEAR(angle(scaled, 4), (1 - smooth) * f4 / 8 + smooth * f4, 1e-14);
}

TEST(KernelsTest, EmbeddingForwardAndGradient) {
  const int64_t B = 2, T = 3, C = 4, V = 5;
  std::vector<int32_t> tok = {1, 4, 1, 0, 2, 4};
  Vec wte = Random(V * C, 21), wpe = Random(T * C, 22), r = Random(B * T * C, 23), out(B * T * C);
  Vec dwte(V * C, 0), dwpe(T * C, 0);
  k::embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
  ExpectNear(ToFloat(out), ref::embedding(tok, wte, &wpe, B, T, C), 1e-6, "embedding");
  k::embedding_backward(dwte.data(), dwpe.data(), r.data(), tok.data(), B, T, C);
  auto loss = [&] { return Dot(r, ref::embedding(tok, wte, &wpe, B, T, C)); };
  ExpectGradMatches(wte, dwte, loss, "embedding dwte");
  ExpectGradMatches(wpe, dwpe, loss, "embedding dwpe");
}

}  // namespace
}  // namespace elastrain
