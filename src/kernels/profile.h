// Opt-in timing of GEMM calls, for benchmarks and performance work.
// Off by default. When off, the hook in Gemm costs one relaxed atomic load and a
// branch; when on, each call takes two steady_clock reads and a mutex to add its time
// to a per-shape table. Totals are process-wide and thread-safe; a GEMM called from
// several threads at once adds each call's wall time, so totals can exceed elapsed time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace elastrain::profile {

namespace detail {
extern std::atomic<bool> g_enabled;
}

// Turns the timing on or off. Calls already in flight are counted by the state they
// started with.
void SetEnabled(bool on);
inline bool Enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
// Forgets everything counted so far.
void Reset();

struct GemmStats {
  int64_t calls = 0;
  double seconds = 0;  // wall time inside the BLAS calls
  double flops = 0;    // 2*M*N*K per call
  double Gflops() const { return seconds > 0 ? flops / seconds / 1e9 : 0.0; }
};
struct GemmShapeStats {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  GemmStats stats;
};
// Everything counted since the last Reset, over all shapes.
GemmStats GemmTotals();
// The same split by (trans_a, trans_b, M, N, K), most time first.
std::vector<GemmShapeStats> GemmByShape();

// Times one GEMM call from construction to destruction when profiling is enabled.
class GemmTimer {
 public:
  GemmTimer(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
    if (Enabled()) Start(trans_a, trans_b, M, N, K);
  }
  ~GemmTimer() {
    if (active_) Stop();
  }
  GemmTimer(const GemmTimer&) = delete;
  GemmTimer& operator=(const GemmTimer&) = delete;

 private:
  void Start(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K);
  void Stop();
  bool active_ = false;
  bool trans_a_ = false, trans_b_ = false;
  int64_t M_ = 0, N_ = 0, K_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace elastrain::profile
