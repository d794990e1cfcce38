// GEMMs through oneDNN's matmul primitive (kernels/gemm_matmul.h). dtype=bfloat16: the
// rounding, and every layout against a float64 reference on the bf16-rounded operands;
// the float32 path is unchanged. float32: every layout and strided views against the
// reference, and the Gemm calls that go through it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_matmul.h"

namespace elastrain {
namespace {

std::vector<float> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<float> Rounded(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  RoundToBf16(v.data(), static_cast<int64_t>(v.size()), b.data());
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = Bf16ToFloat(b[i]);
  return out;
}

TEST(GemmBf16Test, RoundsToNearestEven) {
  const float in[] = {1.f, 1.f + 1.f / 256, 1.f + 3.f / 256, 1.f + 1.f / 128 + 1.f / 1024, -2.5f, 0.f,
                      std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 3.4e38f};
  std::vector<uint16_t> out(std::size(in));
  RoundToBf16(in, static_cast<int64_t>(std::size(in)), out.data());
  EXPECT_EQ(Bf16ToFloat(out[0]), 1.f);
  EXPECT_EQ(Bf16ToFloat(out[1]), 1.f);                  // a tie: to even (down)
  EXPECT_EQ(Bf16ToFloat(out[2]), 1.f + 4.f / 256);      // a tie: to even (up)
  EXPECT_EQ(Bf16ToFloat(out[3]), 1.f + 1.f / 128);      // below the half: down
  EXPECT_EQ(Bf16ToFloat(out[4]), -2.5f);
  EXPECT_EQ(Bf16ToFloat(out[5]), 0.f);
  EXPECT_TRUE(std::isinf(Bf16ToFloat(out[6])));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(out[7])));
  EXPECT_TRUE(std::isinf(Bf16ToFloat(out[8])));         // past bf16's largest finite: infinity
}

TEST(GemmBf16Test, EveryLayoutMatchesAReferenceOnRoundedOperands) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.f, 1.f}) {
        const int64_t M = 37, N = 29, K = 67;
        auto a = Random(M * K, 1), b = Random(K * N, 2), c0 = Random(M * N, 3);
        auto c = c0, c_exact = c0, c_fp32 = c0;
        ASSERT_TRUE(GemmBf16(ta, tb, M, N, K, 1.f, a.data(), ta ? M : K, b.data(), tb ? K : N, beta, c.data(), N))
            << "oneDNN has no bf16 matmul on this CPU";
        auto ar = Rounded(a), br = Rounded(b);
        GemmReference<float>(ta, tb, M, N, K, 1.f, ar.data(), ta ? M : K, br.data(), tb ? K : N, beta,
                             c_exact.data(), N);
        GemmReference<float>(ta, tb, M, N, K, 1.f, a.data(), ta ? M : K, b.data(), tb ? K : N, beta,
                             c_fp32.data(), N);
        double max_vs_fp32 = 0;
        for (int64_t i = 0; i < M * N; ++i) {
          ASSERT_NEAR(c[i], c_exact[i], 1e-4 * std::max(1.f, std::abs(c_exact[i])))
              << "ta=" << ta << " tb=" << tb << " beta=" << beta << " element " << i;
          max_vs_fp32 = std::max(max_vs_fp32, static_cast<double>(std::abs(c[i] - c_fp32[i])));
        }
        // The operands really were rounded: bf16 has 8 significant bits.
        EXPECT_GT(max_vs_fp32, 1e-3) << "ta=" << ta << " tb=" << tb;
      }
}

TEST(GemmBf16Test, StridedOperandsAndResult) {
  // A view of columns of wider matrices, as attention reads its heads out of qkv.
  const int64_t M = 20, N = 8, K = 12, lda = 40, ldb = 30, ldc = 24;
  auto a = Random(M * lda, 6), b = Random(K * ldb, 7), c = Random(M * ldc, 8);
  auto c_exact = c;
  ASSERT_TRUE(GemmBf16(false, false, M, N, K, 1.f, a.data() + 3, lda, b.data() + 5, ldb, 1.f, c.data() + 2, ldc));
  auto ar = Rounded(a), br = Rounded(b);
  GemmReference<float>(false, false, M, N, K, 1.f, ar.data() + 3, lda, br.data() + 5, ldb, 1.f, c_exact.data() + 2,
                       ldc);
  for (int64_t i = 0; i < M * ldc; ++i) ASSERT_NEAR(c[i], c_exact[i], 1e-4 * std::max(1.f, std::abs(c_exact[i]))) << i;
}

TEST(GemmBf16Test, GemmFollowsTheDtypeAndFallsBackForOtherScalars) {
  const int64_t M = 16, N = 16, K = 32;
  auto a = Random(M * K, 4), b = Random(K * N, 5);
  std::vector<float> c32(M * N), c16(M * N), c_half(M * N), ref(M * N);
  Gemm<float>(false, true, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, c32.data(), N);
  SetGemmDtype(ComputeDtype::kBfloat16);
  Gemm<float>(false, true, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, c16.data(), N);
  Gemm<float>(false, true, M, N, K, 0.5f, a.data(), K, b.data(), K, 0.f, c_half.data(), N);  // alpha: float32
  SetGemmDtype(ComputeDtype::kFloat32);
  GemmReference<float>(false, true, M, N, K, 1.f, a.data(), K, b.data(), K, 0.f, ref.data(), N);
  double d32 = 0, d16 = 0, dhalf = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    d32 = std::max(d32, static_cast<double>(std::abs(c32[i] - ref[i])));
    d16 = std::max(d16, static_cast<double>(std::abs(c16[i] - ref[i])));
    dhalf = std::max(dhalf, static_cast<double>(std::abs(2 * c_half[i] - ref[i])));
  }
  EXPECT_LT(d32, 1e-4);
  EXPECT_GT(d16, 1e-3);
  EXPECT_LT(d16, 0.2);
  EXPECT_LT(dhalf, 1e-4);
}

TEST(GemmMatmulF32Test, EveryLayoutAndStridedViewsMatchTheReference) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (float beta : {0.f, 1.f}) {
        // Views into wider matrices (strides past the dense ones), as attention uses.
        const int64_t M = 37, N = 29, K = 67;
        const int64_t lda = (ta ? M : K) + 5, ldb = (tb ? K : N) + 3, ldc = N + 7;
        auto a = Random((ta ? K : M) * lda, 11), b = Random((tb ? N : K) * ldb, 12), c = Random(M * ldc, 13);
        auto ref = c;
        ASSERT_TRUE(GemmMatmulF32(ta, tb, M, N, K, 1.f, a.data(), lda, b.data(), ldb, beta, c.data(), ldc))
            << "oneDNN has no f32 matmul on this CPU";
        GemmReference<float>(ta, tb, M, N, K, 1.f, a.data(), lda, b.data(), ldb, beta, ref.data(), ldc);
        for (int64_t i = 0; i < M * ldc; ++i)
          ASSERT_NEAR(c[i], ref[i], 1e-4 * std::max(1.f, std::abs(ref[i])))
              << "ta=" << ta << " tb=" << tb << " beta=" << beta << " element " << i;
      }
  // Scalars it does not handle are left to the caller, untouched.
  std::vector<float> a(4, 1.f), b(4, 1.f), c(4, 7.f);
  EXPECT_FALSE(GemmMatmulF32(false, true, 2, 2, 2, 0.5f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2));
  EXPECT_FALSE(GemmMatmulF32(false, true, 2, 2, 2, 1.f, a.data(), 2, b.data(), 2, 0.5f, c.data(), 2));
  EXPECT_EQ(c, std::vector<float>(4, 7.f));
}

TEST(GemmMatmulF32Test, LinearLayerShapesThroughGemmMatchTheReference) {
  // x W^T (the forward of a linear layer) goes through the primitive; the vocabulary-wide
  // head and alpha != 1 through sgemm: all agree with the reference.
  for (const auto& [M, N, K, alpha] : {std::tuple<int64_t, int64_t, int64_t, float>{64, 96, 48, 1.f},
                                       {64, 9000, 16, 1.f},
                                       {33, 40, 20, 0.5f}}) {
    auto a = Random(M * K, 21), b = Random(N * K, 22);
    std::vector<float> c(M * N, 3.f), ref(M * N, 3.f);
    Gemm<float>(false, true, M, N, K, alpha, a.data(), K, b.data(), K, 1.f, c.data(), N);
    GemmReference<float>(false, true, M, N, K, alpha, a.data(), K, b.data(), K, 1.f, ref.data(), N);
    for (int64_t i = 0; i < M * N; ++i)
      ASSERT_NEAR(c[i], ref[i], 1e-4 * std::max(1.f, std::abs(ref[i]))) << "M=" << M << " N=" << N << " at " << i;
  }
}

}  // namespace
}  // namespace elastrain
