// GEMM through a BLAS library, row-major:
//   C (M,N) = alpha * op(A) * op(B) + beta * C,  op(X) = X or X^T.
// float goes to oneDNN's dnnl_sgemm or OpenBLAS's cblas_sgemm (SetGemmBackend), or in
// bfloat16 to oneDNN's matmul (SetGemmDtype);
// double (used by gradient checks) always goes to OpenBLAS's cblas_dgemm.
// Thread-safe; the libraries use their own thread pools (OpenMP for oneDNN).
#pragma once

#include <cstdint>
#include <string>

#include "common/dtype.h"
#include "common/gemm_backend.h"
#include "common/status.h"

namespace elastrain {

// "onednn" | "openblas" (kGemmBackendChoices).
Result<GemmBackend> ParseGemmBackend(const std::string& s);
void SetGemmBackend(GemmBackend b);
GemmBackend GetGemmBackend();
// The type float GEMMs compute in (dtype): bfloat16 goes through oneDNN whatever the
// backend (kernels/gemm_matmul.h), falling back to float32 where oneDNN cannot.
void SetGemmDtype(ComputeDtype d);
// Threads for BLAS and for the OpenMP loops of the kernels; 0 = all cores.
void SetComputeThreads(int n);
int ComputeThreads();

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// float32 whatever the dtype, and not counted by kernels/profile.h: the small per-head
// products inside attention, called from its parallel loop (one thread each), where
// bf16's conversions would cost more than they save and a GEMM's own threads would
// only wait on each other.
void GemmF32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
             const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Naive triple loop with the same contract, the reference the fast path is tested against.
template <typename T>
void GemmReference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                   int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// Measures this machine's SGEMM ceiling in GFLOP/s with square matrices of size n,
// running for about `seconds`. Used for MFU and by the benchmarks.
double MeasureSgemmGflops(int64_t n = 1024, double seconds = 0.3);

}  // namespace elastrain
