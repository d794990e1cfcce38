#include "common/memory.h"

#include <sys/mman.h>

namespace elastrain {

void* AllocatePopulated(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: fine if transparent huge pages are off
  return p;
}

void FreePopulated(void* p, size_t bytes) {
  if (p) ::munmap(p, bytes);
}

}  // namespace elastrain
