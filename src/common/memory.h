// Large buffers whose pages are mapped in one go. On this machine kind (a VM) every
// first touch of a 4 KiB page costs ~10 us, so a 400 MB std::vector takes ~1 s to zero;
// mmap(MAP_POPULATE) maps the same memory in ~0.05 s, and transparent huge pages
// (madvise) cut the later TLB misses too. The training state, the activations and the
// checkpoint snapshot use this; small allocations go to operator new as usual.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace elastrain {

// Allocations from this size up are mapped with MAP_POPULATE (and MADV_HUGEPAGE).
inline constexpr size_t kPopulateThresholdBytes = size_t{1} << 20;

// Zeroed memory of `bytes` (>= 1), all pages mapped; throws std::bad_alloc.
void* AllocatePopulated(size_t bytes);
void FreePopulated(void* p, size_t bytes);

template <typename T>
struct PopulatedAllocator {
  using value_type = T;
  PopulatedAllocator() = default;
  template <typename U>
  PopulatedAllocator(const PopulatedAllocator<U>&) {}  // NOLINT: allocator rebinding
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kPopulateThresholdBytes) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(AllocatePopulated(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kPopulateThresholdBytes) ::operator delete(p);
    else FreePopulated(p, bytes);
  }
  template <typename U>
  bool operator==(const PopulatedAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const PopulatedAllocator<U>&) const { return false; }
};

// A float buffer of the training state (see above).
using FloatBuffer = std::vector<float, PopulatedAllocator<float>>;

}  // namespace elastrain
