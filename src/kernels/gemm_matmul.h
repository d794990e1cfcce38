// GEMMs through oneDNN's matmul primitive (brgemm kernels) rather than its sgemm.
//
// GemmMatmulF32: float32 as it is, for the shapes where the primitive beats dnnl_sgemm
// (kernels/gemm.cpp picks them; docs/performance.md has the measurements).
//
// GemmBf16: float GEMMs computed in bfloat16 (MaxText's dtype=bfloat16, weight_dtype=float32):
// both operands are rounded to bfloat16 (round to nearest even) into scratch buffers of
// the calling thread, oneDNN's matmul primitive multiplies them with float32
// accumulation, and C stays float32. The caller's arrays (master weights, activations,
// gradients) are never changed to bfloat16: only the products are.
//
// Primitives are created once per (shape, layout, beta) and kept per thread; oneDNN picks
// its bf16 kernels (brgemm avx512_core_bf16, AMX) where the CPU has the instructions.
#pragma once

#include <cstdint>

namespace elastrain {

// C (M,N) = alpha * op(A) op(B) + beta * C in bfloat16 x bfloat16 -> float32, row-major.
// Handles alpha == 1 and beta in {0, 1} (every GEMM of the model); returns false, having
// computed nothing, for other scalars or when oneDNN has no bf16 matmul on this CPU, and
// the caller then computes in float32.
bool GemmBf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
              int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// C = alpha * op(A) op(B) + beta * C in float32 through the matmul primitive; the same
// scalars as GemmBf16, false (nothing computed) otherwise.
bool GemmMatmulF32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Whether this CPU runs bf16 matmuls in hardware (oneDNN's effective ISA has bf16
// instructions: avx512_core_bf16, AMX); without them oneDNN emulates bf16 or has no
// kernel, and dtype=bfloat16 is only slower.
bool CpuHasBf16();
// oneDNN's name for the instruction set it runs on here ("cpu_isa_avx512_core_bf16").
const char* OneDnnIsa();

// out[i] = in[i] rounded to the nearest bfloat16 (ties to even; NaN stays NaN), as the
// upper 16 bits of a float.
void RoundToBf16(const float* in, int64_t n, uint16_t* out);
// The float a bfloat16 stands for.
float Bf16ToFloat(uint16_t b);

}  // namespace elastrain
