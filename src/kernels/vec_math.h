// exp for float that a `#pragma omp simd` loop vectorises: libm's expf and tanhf are
// scalar calls here (glibc's vector versions need -ffast-math), which made GELU and the
// cross-entropy cost more than their share of the step (docs/performance.md).
//
//   ExpF: Cody-Waite reduction x = n ln2 + r (|r| <= ln2 / 2) and a degree-6 Taylor
//         polynomial for e^r, scaled by 2^n through the exponent bits: within 2 ulp of
//         e^x for x in [-87, 88]; inputs are clamped to that range (e^-87 ~ 1.6e-38
//         stands for 0, e^88 ~ 1.7e38 for overflow).
// The double kernels (gradient checks) keep libm.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace elastrain::kernels {

inline float ExpF(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693145751953125f;  // ln2 split: the high part is exact in float
  r = r - n * 1.42860682030941723e-6f;
  float p = 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

}  // namespace elastrain::kernels
