// AdamW with decoupled weight decay, the warmup + cosine learning-rate schedule, and
// global-norm gradient clipping, over flat fp32 buffers.
#pragma once

#include <cstdint>

#include "model/layout.h"

namespace elastrain {

struct AdamWOptions {
  double b1 = 0.9;            // first-moment decay
  double b2 = 0.95;           // second-moment decay
  double eps = 1e-8;          // added to sqrt(v_hat)
  double weight_decay = 0.1;  // decoupled: p -= lr * wd * p, only on matrices (>= 2 dims)
};

// One AdamW update of params in place; m and v are the moments (same layout), `step`
// counts from 1 (bias correction). Only tensors of the layout are touched. The update
// sees grads[i] * grad_scale (gradient clipping fused into the update's one pass over
// the state: the same floats as scaling the gradients first).
void AdamWUpdate(const ParamLayout& layout, float* params, const float* grads, float* m, float* v, int64_t step,
                 double lr, const AdamWOptions& opt, float grad_scale = 1.f);
// The same update of n consecutive values, with `decay` telling whether weight decay
// applies. AdamWUpdate calls it per tensor; a sharded optimizer per slice of a tensor.
void AdamWUpdateSpan(float* params, const float* grads, float* m, float* v, int64_t n, int64_t step, double lr,
                     bool decay, const AdamWOptions& opt, float grad_scale = 1.f);

struct ScheduleOptions {
  double peak_lr = 3e-4;
  int64_t warmup_steps = 0;          // linear warmup from 0 over these steps
  int64_t total_steps = 1;           // cosine decay ends here; steps from here on get 0
  double final_fraction = 0.1;       // lr at total_steps = peak_lr * final_fraction
};
// Learning rate for 0-based `step`: linear warmup to peak over warmup_steps, then cosine
// decay towards peak*final_fraction at total_steps, and 0 from total_steps on (MaxText's
// schedule: learning_rate_schedule_steps shorter than steps ends in steps at rate 0).
double LearningRate(const ScheduleOptions& s, int64_t step);

// g[0..n) = 0, in parallel chunks (a single memset leaves cores and bandwidth idle).
void ZeroGrads(float* g, int64_t n);
// Sum of g[i]^2 over [0, n), accumulated in double over fixed chunks that are summed
// in order: the same bits whatever the thread count. Vectorised and parallel: it runs
// at memory speed.
double SumOfSquares(const float* g, int64_t n);
// Global L2 norm of g[0..n): sqrt(SumOfSquares).
double GradNorm(const float* g, int64_t n);
// The factor that clipping to `threshold` applies to gradients of norm `norm`: 1 within
// the threshold or when it is 0 (clipping off).
float ClipScale(double norm, double threshold);
// Scales g so that its norm is at most `threshold` (0 disables); returns the norm before.
double ClipGradNorm(float* g, int64_t n, double threshold);

}  // namespace elastrain
