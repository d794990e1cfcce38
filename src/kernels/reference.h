// Naive reference forward kernels: plain loops in double precision, no threads, no BLAS,
// written for obviousness. Tests check the fast kernels of kernels/ops.h against them,
// and the fast backward kernels against finite differences of these.
#pragma once

#include <cstdint>
#include <vector>

namespace elastrain::kernels::reference {

using Vec = std::vector<double>;

Vec embedding(const std::vector<int32_t>& tokens, const Vec& wte, const Vec* wpe, int64_t B, int64_t T, int64_t C);
Vec rmsnorm(const Vec& inp, const Vec& weight, int64_t N, int64_t C, double eps);
Vec layernorm(const Vec& inp, const Vec& weight, const Vec& bias, int64_t N, int64_t C, double eps);
Vec matmul(const Vec& inp, const Vec& weight, const Vec* bias, int64_t N, int64_t C, int64_t OC);
// Applies RoPE to q and k heads of qkv (B,T,(Hq+2Hkv)*hd), returning a copy.
Vec rope(const Vec& qkv, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t hd, double theta);
// Causal GQA attention with an explicit mask; returns out (B,T,Hq*hd).
Vec attention(const Vec& qkv, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t hd);
Vec swiglu(const Vec& gu, int64_t N, int64_t F);
Vec gelu(const Vec& inp);
// Per-row -log softmax(logits)[target].
Vec crossentropy(const Vec& logits, const std::vector<int32_t>& targets, int64_t N, int64_t V);

}  // namespace elastrain::kernels::reference
