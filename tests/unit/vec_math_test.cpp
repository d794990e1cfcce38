// The float kernels' vectorised exp (kernels/vec_math.h), and the float GELU,
// cross-entropy and attention that use it, against libm and the double kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels/vec_math.h"

namespace elastrain {
namespace {

namespace k = kernels;

TEST(VecMathTest, ExpFIsWithinTwoUlpOverItsRange) {
  double worst = 0;
  for (float x = -87.f; x <= 88.f; x += 0.0013f) {
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(k::ExpF(x) - exact) / exact);
  }
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_EQ(k::ExpF(0.f), 1.f);
  EXPECT_LT(k::ExpF(-1000.f), 1e-37f);  // clamped: stands for 0 in a softmax
  EXPECT_GT(k::ExpF(-1000.f), 0.f);
  EXPECT_TRUE(std::isfinite(k::ExpF(1000.f)));
}

template <typename T>
std::vector<T> Random(size_t n, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

TEST(VecMathTest, FloatGeluMatchesTheDoubleKernel) {
  const int64_t n = 100000;
  auto xd = Random<double>(n, 1, 3.0), rd = Random<double>(n, 2, 1.0);
  std::vector<float> xf(xd.begin(), xd.end()), rf(rd.begin(), rd.end());
  std::vector<double> yd(n), dd(n);
  std::vector<float> yf(n), df(n);
  k::gelu_forward(yd.data(), xd.data(), n);
  k::gelu_forward(yf.data(), xf.data(), n);
  k::gelu_backward(dd.data(), xd.data(), rd.data(), n);
  k::gelu_backward(df.data(), xf.data(), rf.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    // The float input itself is rounded: compare at float precision of the values.
    ASSERT_NEAR(yf[i], yd[i], 1e-6 * std::max(1.0, std::abs(yd[i]))) << "x=" << xd[i];
    ASSERT_NEAR(df[i], dd[i], 2e-6 * std::max(1.0, std::abs(dd[i]))) << "x=" << xd[i];
  }
}

TEST(VecMathTest, FloatCrossEntropyMatchesTheDoubleKernel) {
  const int64_t N = 6, V = 5003;
  auto ld = Random<double>(N * V, 3, 4.0);
  std::vector<float> lf(ld.begin(), ld.end());
  std::vector<int32_t> targets = {0, 17, -1, 5002, 99, 2500};
  std::vector<double> lossd(N), dd(N * V);
  std::vector<float> lossf(N), df(N * V), lossf_only(N);
  const double dloss = 1.0 / N;
  k::crossentropy_forward_backward(lossd.data(), dd.data(), ld.data(), targets.data(), N, V, dloss);
  k::crossentropy_forward_backward(lossf.data(), df.data(), lf.data(), targets.data(), N, V, static_cast<float>(dloss));
  k::crossentropy_forward_backward(lossf_only.data(), static_cast<float*>(nullptr), lf.data(), targets.data(), N, V,
                                   static_cast<float>(dloss));
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_NEAR(lossf[n], lossd[n], 2e-6 * std::max(1.0, lossd[n])) << "row " << n;
    EXPECT_EQ(lossf_only[n], lossf[n]) << "row " << n;
  }
  for (int64_t i = 0; i < N * V; ++i) ASSERT_NEAR(df[i], dd[i], 1e-8 + 1e-5 * std::abs(dd[i])) << i;
  // In place, as the model calls it.
  std::vector<float> inplace = lf;
  k::crossentropy_forward_backward(lossf.data(), inplace.data(), inplace.data(), targets.data(), N, V,
                                   static_cast<float>(dloss));
  for (int64_t i = 0; i < N * V; ++i) ASSERT_EQ(inplace[i], df[i]) << i;
}

TEST(VecMathTest, FloatAttentionMatchesTheDoubleKernel) {
  const int64_t B = 2, T = 37, Hq = 4, Hkv = 2, hd = 16, S = (Hq + 2 * Hkv) * hd;
  auto qkvd = Random<double>(B * T * S, 4, 1.0), dyd = Random<double>(B * T * Hq * hd, 5, 1.0);
  std::vector<float> qkvf(qkvd.begin(), qkvd.end()), dyf(dyd.begin(), dyd.end());
  std::vector<double> outd(B * T * Hq * hd), attd(B * Hq * T * T), dd(B * T * S);
  std::vector<float> outf(outd.size()), attf(attd.size()), df(dd.size());
  k::attention_forward(outd.data(), attd.data(), qkvd.data(), B, T, Hq, Hkv, hd);
  k::attention_forward(outf.data(), attf.data(), qkvf.data(), B, T, Hq, Hkv, hd);
  k::attention_backward(dd.data(), dyd.data(), qkvd.data(), attd.data(), B, T, Hq, Hkv, hd);
  k::attention_backward(df.data(), dyf.data(), qkvf.data(), attf.data(), B, T, Hq, Hkv, hd);
  for (size_t i = 0; i < outd.size(); ++i) ASSERT_NEAR(outf[i], outd[i], 1e-5) << i;
  for (size_t i = 0; i < attd.size(); ++i) ASSERT_NEAR(attf[i], attd[i], 1e-6) << i;
  for (size_t i = 0; i < dd.size(); ++i) ASSERT_NEAR(df[i], dd[i], 2e-5 * std::max(1.0, std::abs(dd[i]))) << i;
}

}  // namespace
}  // namespace elastrain
