#include "optim/optim.h"

#include <omp.h>

#include <cmath>
#include <vector>

namespace elastrain {

void AdamWUpdateSpan(float* p, const float* g, float* m, float* v, int64_t n, int64_t step, double lr, bool decay,
                     const AdamWOptions& o) {
  const float b1 = static_cast<float>(o.b1), b2 = static_cast<float>(o.b2);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(o.b1, static_cast<double>(step))));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(o.b2, static_cast<double>(step))));
  const float flr = static_cast<float>(lr), eps = static_cast<float>(o.eps);
  const float wd = decay ? static_cast<float>(o.weight_decay) : 0.f;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float mi = b1 * m[i] + (1.f - b1) * g[i];
    float vi = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= flr * (mi * c1 / (std::sqrt(vi * c2) + eps) + wd * p[i]);
  }
}

void AdamWUpdate(const ParamLayout& layout, float* params, const float* grads, float* m, float* v, int64_t step,
                 double lr, const AdamWOptions& opt) {
  for (const ParamTensor& t : layout.tensors)
    AdamWUpdateSpan(params + t.offset, grads + t.offset, m + t.offset, v + t.offset, t.size, step, lr,
                    t.shape.size() >= 2, opt);
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

double GradNorm(const float* g, int64_t n) {
  // Fixed per-thread blocks summed in thread order: the same bits every run.
  const int nt = omp_get_max_threads();
  std::vector<double> partial(nt, 0.0);
#pragma omp parallel num_threads(nt)
  {
    const int id = omp_get_thread_num(), cnt = omp_get_num_threads();
    const int64_t per = (n + cnt - 1) / cnt, b = std::min(n, id * per), e = std::min(n, b + per);
    double s = 0;
    for (int64_t i = b; i < e; ++i) s += static_cast<double>(g[i]) * g[i];
    partial[id] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return std::sqrt(total);
}

double ClipGradNorm(float* g, int64_t n, double threshold) {
  const double norm = GradNorm(g, n);
  if (threshold > 0 && norm > threshold) {
    const float scale = static_cast<float>(threshold / (norm + 1e-6));
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) g[i] *= scale;
  }
  return norm;
}

}  // namespace elastrain
