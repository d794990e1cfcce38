#include "optim/optim.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace elastrain {

void AdamWUpdateSpan(float* p, const float* g, float* m, float* v, int64_t n, int64_t step, double lr, bool decay,
                     const AdamWOptions& o, float grad_scale) {
  const float b1 = static_cast<float>(o.b1), b2 = static_cast<float>(o.b2);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(o.b1, static_cast<double>(step))));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(o.b2, static_cast<double>(step))));
  const float flr = static_cast<float>(lr), eps = static_cast<float>(o.eps);
  const float wd = decay ? static_cast<float>(o.weight_decay) : 0.f;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale;
    float mi = b1 * m[i] + (1.f - b1) * gi;
    float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= flr * (mi * c1 / (std::sqrt(vi * c2) + eps) + wd * p[i]);
  }
}

void AdamWUpdate(const ParamLayout& layout, float* params, const float* grads, float* m, float* v, int64_t step,
                 double lr, const AdamWOptions& opt, float grad_scale) {
  for (const ParamTensor& t : layout.tensors)
    AdamWUpdateSpan(params + t.offset, grads + t.offset, m + t.offset, v + t.offset, t.size, step, lr,
                    t.shape.size() >= 2, opt, grad_scale);
}

double LearningRate(const ScheduleOptions& s, int64_t step) {
  if (step >= s.total_steps) return 0.0;  // past the schedule (MaxText's constant 0)
  if (s.warmup_steps > 0 && step < s.warmup_steps)
    return s.peak_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, s.total_steps - s.warmup_steps);
  double progress = static_cast<double>(step - s.warmup_steps) / static_cast<double>(decay_steps);
  progress = std::min(1.0, std::max(0.0, progress));
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return s.peak_lr * (s.final_fraction + (1.0 - s.final_fraction) * cosine);
}

void ZeroGrads(float* g, int64_t n) {
  constexpr int64_t kChunk = int64_t{1} << 16;
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t b = 0; b < n; b += kChunk) std::memset(g + b, 0, sizeof(float) * std::min(kChunk, n - b));
}

double SumOfSquares(const float* g, int64_t n) {
  // Chunks of a fixed size, each summed in kLanes independent double accumulators (so the
  // loop vectorises instead of waiting on one add chain), the chunks' sums added in order.
  constexpr int64_t kChunk = int64_t{1} << 15;
  constexpr int kLanes = 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const float* x = g + c * kChunk;
    const int64_t len = std::min(kChunk, n - c * kChunk), body = len - len % kLanes;
    double acc[kLanes] = {};
    for (int64_t i = 0; i < body; i += kLanes)
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(x[i + l]) * x[i + l];
    for (int64_t i = body; i < len; ++i) acc[i - body] += static_cast<double>(x[i]) * x[i];
    double s = 0;
    for (double a : acc) s += a;
    partial[c] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

double GradNorm(const float* g, int64_t n) { return std::sqrt(SumOfSquares(g, n)); }

float ClipScale(double norm, double threshold) {
  return threshold > 0 && norm > threshold ? static_cast<float>(threshold / (norm + 1e-6)) : 1.f;
}

double ClipGradNorm(float* g, int64_t n, double threshold) {
  const double norm = GradNorm(g, n);
  const float scale = ClipScale(norm, threshold);
  if (scale != 1.f) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) g[i] *= scale;
  }
  return norm;
}

}  // namespace elastrain
