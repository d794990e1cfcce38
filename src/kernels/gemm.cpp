#include "kernels/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <optional>
#include <chrono>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "kernels/gemm_matmul.h"
#include "kernels/profile.h"

namespace elastrain {

namespace {
std::atomic<GemmBackend> g_backend{GemmBackend::kOneDnn};
std::atomic<int> g_threads{0};
std::atomic<ComputeDtype> g_dtype{ComputeDtype::kFloat32};
}  // namespace

Result<GemmBackend> ParseGemmBackend(const std::string& s) {
  if (const std::optional<GemmBackend> b = ParseChoice(kGemmBackendChoices, s)) return *b;
  return Status::InvalidArgument("gemm_backend=" + s + ": expected onednn or openblas");
}
void SetGemmBackend(GemmBackend b) { g_backend = b; }
GemmBackend GetGemmBackend() { return g_backend; }
void SetGemmDtype(ComputeDtype d) { g_dtype = d; }

void SetComputeThreads(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  g_threads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}
int ComputeThreads() { return g_threads > 0 ? g_threads.load() : omp_get_max_threads(); }

namespace {
// float32 through the configured backend, whatever the dtype (the SGEMM ceiling too).
void Sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (g_backend == GemmBackend::kOneDnn) {
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st == dnnl_success) return;
    LOG_WARN("dnnl_sgemm failed with status {}; falling back to OpenBLAS", static_cast<int>(st));
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
              lda, B, ldb, beta, C, ldc);
}

// A linear layer's forward, x W^T with W stored (out, in): oneDNN's matmul primitive ran
// these 1.1-1.6x faster than dnnl_sgemm here (the MLP's down projection most), and
// never more than 5% slower; sgemm stayed ahead for NN and TN, and for the output head's
// (N = vocabulary) forward (docs/performance.md).
constexpr int64_t kMatmulMaxN = 8192;
bool UseMatmulF32(bool ta, bool tb, int64_t N) {
  return g_backend == GemmBackend::kOneDnn && !ta && tb && N <= kMatmulMaxN;
}
}  // namespace

template <>
void Gemm<float>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  profile::GemmTimer timer(ta, tb, M, N, K);  // no-op unless profile::SetEnabled(true)
  if (g_dtype == ComputeDtype::kBfloat16 && GemmBf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  if (UseMatmulF32(ta, tb, N) && GemmMatmulF32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  Sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void GemmF32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
             const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  Sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <>
void Gemm<double>(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
              lda, B, ldb, beta, C, ldc);
}

template <typename T>
void GemmReference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = ta ? A[k * lda + i] : A[i * lda + k];
        double b = tb ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      T prev = beta == T(0) ? T(0) : beta * C[i * ldc + j];
      C[i * ldc + j] = static_cast<T>(alpha * acc) + prev;
    }
}
template void GemmReference<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                   const float*, int64_t, float, float*, int64_t);
template void GemmReference<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                    const double*, int64_t, double, double*, int64_t);

double MeasureSgemmGflops(int64_t n, double seconds) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.f);
  Sgemm(false, true, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);  // warm up
  auto t0 = std::chrono::steady_clock::now();
  int iters = 0;
  double elapsed = 0;
  do {
    Sgemm(false, true, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    ++iters;
    elapsed = SecondsSince(t0);
  } while (elapsed < seconds);
  return 2.0 * n * n * n * iters / elapsed / 1e9;
}

}  // namespace elastrain
