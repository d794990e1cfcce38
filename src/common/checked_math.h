// Overflow-checked integer arithmetic for sizes that come from files or configs
// (shapes, element counts, byte counts, offsets). Each helper returns the value or an
// InvalidArgument naming the quantity, e.g.
//   "tensor 'wq' element count: 4294967296 * 4294967296 overflows a 64-bit integer".
// Callers that read files turn the code into Corruption (see CorruptionOf). Header-only.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace elastrain {

// a * b, or InvalidArgument naming `what`.
inline Result<int64_t> CheckedMul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    return Status::InvalidArgument(fmt::format("{}: {} * {} overflows a 64-bit integer", what, a, b));
  return out;
}

// a + b, or InvalidArgument naming `what`.
inline Result<int64_t> CheckedAdd(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    return Status::InvalidArgument(fmt::format("{}: {} + {} overflows a 64-bit integer", what, a, b));
  return out;
}

// The product of `dims` (1 for none); InvalidArgument for a negative dimension or an
// overflowing product, naming `what`.
inline Result<int64_t> CheckedProduct(const std::vector<int64_t>& dims, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return Status::InvalidArgument(fmt::format("{}: negative dimension {}", what, d));
    if (__builtin_mul_overflow(n, d, &n)) {
      std::string shape;
      for (int64_t x : dims) shape += fmt::format("{}{}", shape.empty() ? "" : ", ", x);
      return Status::InvalidArgument(fmt::format("{}: the product of [{}] overflows a 64-bit integer", what, shape));
    }
  }
  return n;
}

// The same error as Corruption (for sizes read from a file that fail their check).
inline Status CorruptionOf(const Status& st) { return st.ok() ? st : Status::Corruption(st.message()); }

}  // namespace elastrain
