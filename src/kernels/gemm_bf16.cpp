#include "kernels/gemm_bf16.h"

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

struct PrimitiveKey {
  bool ta, tb, accumulate;
  int64_t M, N, K, ldc;
  bool operator<(const PrimitiveKey& o) const {
    return std::tie(ta, tb, accumulate, M, N, K, ldc) < std::tie(o.ta, o.tb, o.accumulate, o.M, o.N, o.K, o.ldc);
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

// The bf16 matmul of op(A) (M,K) x op(B) (K,N) -> C (M,N) float32 (row stride ldc),
// operands dense in their stored layout (a transposed operand is the other matrix read
// by columns).
Matmul MakeMatmul(ThreadState& s, const PrimitiveKey& k) {
  const memory::dims a_strides = k.ta ? memory::dims{1, k.M} : memory::dims{k.K, 1};
  const memory::dims b_strides = k.tb ? memory::dims{1, k.K} : memory::dims{k.N, 1};
  memory::desc a({k.M, k.K}, memory::data_type::bf16, a_strides);
  memory::desc b({k.K, k.N}, memory::data_type::bf16, b_strides);
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

bool GemmBf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (alpha != 1.f || (beta != 0.f && beta != 1.f) || K == 0) return false;
  try {
    ThreadState& s = State();
    const PrimitiveKey key{ta, tb, beta == 1.f, M, N, K, ldc};
    auto it = s.primitives.find(key);
    if (it == s.primitives.end()) it = s.primitives.emplace(key, MakeMatmul(s, key)).first;
    ToBf16(A, ta ? K : M, ta ? M : K, lda, &s.a);
    ToBf16(B, tb ? N : K, tb ? K : N, ldb, &s.b);
    const dnnl::matmul::primitive_desc& pd = it->second.pd;
    memory a(pd.src_desc(), s.engine, s.a.data());
    memory b(pd.weights_desc(), s.engine, s.b.data());
    memory c(pd.dst_desc(), s.engine, C);
    it->second.primitive.execute(s.stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    s.stream.wait();
    return true;
  } catch (const dnnl::error& e) {
    if (!g_warned.exchange(true))
      LOG_WARN("dtype=bfloat16: oneDNN has no bf16 matmul here ({}); computing in float32", e.what());
    return false;
  }
}

}  // namespace elastrain
