#include "kernels/profile.h"

#include "common/clock.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace elastrain::profile {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {
using ShapeKey = std::tuple<bool, bool, int64_t, int64_t, int64_t>;  // trans_a, trans_b, M, N, K
std::mutex g_mu;
std::map<ShapeKey, GemmStats> g_by_shape;  // GUARDED_BY(g_mu)
}  // namespace

void SetEnabled(bool on) { detail::g_enabled.store(on, std::memory_order_relaxed); }

void Reset() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_by_shape.clear();
}

GemmStats GemmTotals() {
  std::lock_guard<std::mutex> lock(g_mu);
  GemmStats total;
  for (const auto& [key, s] : g_by_shape) {
    total.calls += s.calls;
    total.seconds += s.seconds;
    total.flops += s.flops;
  }
  return total;
}

std::vector<GemmShapeStats> GemmByShape() {
  std::vector<GemmShapeStats> out;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [key, s] : g_by_shape) {
      GemmShapeStats e;
      std::tie(e.trans_a, e.trans_b, e.M, e.N, e.K) = key;
      e.stats = s;
      out.push_back(e);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const GemmShapeStats& a, const GemmShapeStats& b) { return a.stats.seconds > b.stats.seconds; });
  return out;
}

void GemmTimer::Start(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  active_ = true;
  trans_a_ = trans_a;
  trans_b_ = trans_b;
  M_ = M;
  N_ = N;
  K_ = K;
  t0_ = std::chrono::steady_clock::now();
}

void GemmTimer::Stop() {
  const double sec = SecondsSince(t0_);
  std::lock_guard<std::mutex> lock(g_mu);
  GemmStats& s = g_by_shape[ShapeKey{trans_a_, trans_b_, M_, N_, K_}];
  s.calls += 1;
  s.seconds += sec;
  s.flops += 2.0 * static_cast<double>(M_) * static_cast<double>(N_) * static_cast<double>(K_);
}

}  // namespace elastrain::profile
