#include "kernels/gemm_matmul.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include <atomic>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "common/log.h"

namespace elastrain {

namespace {

using dnnl::memory;

// lda and ldb are those of the operands the primitive reads: the caller's for float32,
// the dense bf16 copies' for bfloat16.
struct PrimitiveKey {
  bool bf16, ta, tb, accumulate;
  int64_t M, N, K, lda, ldb, ldc;
  bool operator<(const PrimitiveKey& o) const {
    return std::tie(bf16, ta, tb, accumulate, M, N, K, lda, ldb, ldc) <
           std::tie(o.bf16, o.ta, o.tb, o.accumulate, o.M, o.N, o.K, o.lda, o.ldb, o.ldc);
  }
};

struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

// What one thread keeps: its engine and stream, the primitives it has built, and the
// bf16 copies of the operands of its current GEMM.
struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<PrimitiveKey, Matmul> primitives;
  std::vector<uint16_t> a, b;
};

ThreadState& State() {
  thread_local ThreadState s;
  return s;
}

std::atomic<bool> g_warned{false};

// The matmul of op(A) (M,K) x op(B) (K,N) -> C (M,N) float32 (row stride ldc), operands
// bf16 or float32 with row strides lda and ldb in their stored layout (a transposed
// operand is the other matrix read by columns).
Matmul MakeMatmul(ThreadState& s, const PrimitiveKey& k) {
  const memory::dims a_strides = k.ta ? memory::dims{1, k.lda} : memory::dims{k.lda, 1};
  const memory::dims b_strides = k.tb ? memory::dims{1, k.ldb} : memory::dims{k.ldb, 1};
  const memory::data_type in = k.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  memory::desc a({k.M, k.K}, in, a_strides);
  memory::desc b({k.K, k.N}, in, b_strides);
  memory::desc c({k.M, k.N}, memory::data_type::f32, memory::dims{k.ldc, 1});
  dnnl::primitive_attr attr;
  if (k.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, s.engine);
  return Matmul{pd, dnnl::matmul(pd)};
}

// rows x cols of `in` (row stride ld) to bf16, dense (row stride cols).
void ToBf16(const float* in, int64_t rows, int64_t cols, int64_t ld, std::vector<uint16_t>* out) {
  out->resize(static_cast<size_t>(rows * cols));
  uint16_t* o = out->data();
  if (ld == cols) {
    RoundToBf16(in, rows * cols, o);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) RoundToBf16(in + r * ld, cols, o + r * cols);
}

}  // namespace

void RoundToBf16(const float* in, int64_t n, uint16_t* out) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &in[i], sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    out[i] = static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : rounded);
  }
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

bool CpuHasBf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

const char* OneDnnIsa() { return dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()); }

namespace {
// Runs op(A) op(B) (+ C when accumulate) through the thread's cached primitive; false
// (nothing computed) where oneDNN has no such matmul here, warning once.
bool Execute(ThreadState& s, const PrimitiveKey& key, const void* A, const void* B, float* C) {
  try {
    auto it = s.primitives.find(key);
    if (it == s.primitives.end()) it = s.primitives.emplace(key, MakeMatmul(s, key)).first;
    const dnnl::matmul::primitive_desc& pd = it->second.pd;
    memory a(pd.src_desc(), s.engine, const_cast<void*>(A));
    memory b(pd.weights_desc(), s.engine, const_cast<void*>(B));
    memory c(pd.dst_desc(), s.engine, C);
    it->second.primitive.execute(s.stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    s.stream.wait();
    return true;
  } catch (const dnnl::error& e) {
    if (!g_warned.exchange(true))
      LOG_WARN("oneDNN has no {} matmul here ({}); using its sgemm", key.bf16 ? "bf16" : "f32", e.what());
    return false;
  }
}
}  // namespace

bool GemmBf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (alpha != 1.f || (beta != 0.f && beta != 1.f) || K == 0) return false;
  ThreadState& s = State();
  ToBf16(A, ta ? K : M, ta ? M : K, lda, &s.a);
  ToBf16(B, tb ? N : K, tb ? K : N, ldb, &s.b);
  const PrimitiveKey key{true, ta, tb, beta == 1.f, M, N, K, ta ? M : K, tb ? K : N, ldc};
  return Execute(s, key, s.a.data(), s.b.data(), C);
}

bool GemmMatmulF32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (alpha != 1.f || (beta != 0.f && beta != 1.f) || K == 0) return false;
  const PrimitiveKey key{false, ta, tb, beta == 1.f, M, N, K, lda, ldb, ldc};
  return Execute(State(), key, A, B, C);
}

}  // namespace elastrain
