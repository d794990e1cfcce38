// The optimizer's memory-bound kernels (optim/optim.h): the gradient norm's sum of
// squares (exact enough, and the same bits whatever the thread count), clipping fused
// into AdamW (the same floats as scaling the gradients first), and AdamW itself against
// its formula in double.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "optim/optim.h"

namespace elastrain {
namespace {

std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(OptimTest, SumOfSquaresIsExactToDoubleRoundingForEverySize) {
  for (int64_t n : {0, 1, 17, 33, (1 << 15) - 1, (1 << 15) + 3, (1 << 20) + 5}) {
    auto g = Random(static_cast<size_t>(n), 7 + n);
    long double exact = 0;
    for (float x : g) exact += static_cast<long double>(x) * x;
    const double got = SumOfSquares(g.data(), n);
    EXPECT_NEAR(got, static_cast<double>(exact), 1e-12 * static_cast<double>(exact) + 1e-300) << "n=" << n;
  }
}

TEST(OptimTest, SumOfSquaresHasTheSameBitsForAnyThreadCount) {
  auto g = Random((1 << 20) + 12345, 3);
  const int before = omp_get_max_threads();
  std::vector<double> got;
  for (int threads : {1, 2, 3, 5}) {
    omp_set_num_threads(threads);
    got.push_back(SumOfSquares(g.data(), static_cast<int64_t>(g.size())));
  }
  omp_set_num_threads(before);
  for (double x : got) EXPECT_EQ(std::memcmp(&x, &got[0], sizeof x), 0) << x << " vs " << got[0];
}

TEST(OptimTest, ClipScale) {
  EXPECT_EQ(ClipScale(0.5, 1.0), 1.f);
  EXPECT_EQ(ClipScale(1.0, 1.0), 1.f);
  EXPECT_EQ(ClipScale(100.0, 0.0), 1.f);  // clipping off
  EXPECT_EQ(ClipScale(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
}

TEST(OptimTest, ClippingFusedIntoAdamWGivesTheFloatsOfClippingFirst) {
  const int64_t n = 100003;
  auto g = Random(n, 1, 3.f), p0 = Random(n, 2), m0 = Random(n, 3, 0.1f), v0 = Random(n, 4, 0.1f);
  for (auto& x : v0) x = x * x;
  const double norm = GradNorm(g.data(), n);
  const float scale = ClipScale(norm, 1.0);
  ASSERT_LT(scale, 1.f);
  AdamWOptions opt;
  // Clipping first, then the update.
  auto g1 = g, p1 = p0, m1 = m0, v1 = v0;
  EXPECT_EQ(ClipGradNorm(g1.data(), n, 1.0), norm);
  AdamWUpdateSpan(p1.data(), g1.data(), m1.data(), v1.data(), n, 3, 1e-3, true, opt);
  // Fused.
  auto p2 = p0, m2 = m0, v2 = v0;
  AdamWUpdateSpan(p2.data(), g.data(), m2.data(), v2.data(), n, 3, 1e-3, true, opt, scale);
  EXPECT_EQ(std::memcmp(p1.data(), p2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(m1.data(), m2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v1.data(), v2.data(), n * sizeof(float)), 0);
}

TEST(OptimTest, AdamWFollowsItsFormula) {
  const int64_t n = 1000;
  auto g = Random(n, 5), p = Random(n, 6), m = Random(n, 7, 0.1f), v = Random(n, 8, 0.1f);
  for (auto& x : v) x = x * x;
  const auto p0 = p, m0 = m, v0 = v;
  AdamWOptions o;
  const int64_t step = 4;
  const double lr = 2e-3, scale = 0.5;
  AdamWUpdateSpan(p.data(), g.data(), m.data(), v.data(), n, step, lr, true, o, static_cast<float>(scale));
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[i] * scale;
    const double mi = o.b1 * m0[i] + (1 - o.b1) * gi, vi = o.b2 * v0[i] + (1 - o.b2) * gi * gi;
    const double mhat = mi / (1 - std::pow(o.b1, step)), vhat = vi / (1 - std::pow(o.b2, step));
    const double pi = p0[i] - lr * (mhat / (std::sqrt(vhat) + o.eps) + o.weight_decay * p0[i]);
    ASSERT_NEAR(m[i], mi, 1e-6) << i;
    ASSERT_NEAR(v[i], vi, 1e-6) << i;
    ASSERT_NEAR(p[i], pi, 1e-5 * std::max(1.0, std::abs(pi))) << i;
  }
}

}  // namespace
}  // namespace elastrain
