// The safetensors header reader (src/ckpt/safetensors.h): the input is a whole file.
// ReadSafetensorsHeader takes a path, so the input goes into an in-memory file (memfd)
// read back through /proc/self/fd/N: no disk, no temp files left behind.
// Property: an accepted header's entries lie inside the file, sorted, without overlap,
// and each entry's bytes can be read.
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "fuzz_check.h"

using namespace elastrain;

namespace {
int MemFile() {
  static const int fd = memfd_create("fuzz_safetensors", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0, "memfd_create");
  return fd;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = MemFile();
  FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
  FUZZ_CHECK(size == 0 || pwrite(fd, data, size, 0) == static_cast<ssize_t>(size), "pwrite");
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  Result<ckpt::SafetensorsHeader> h = ckpt::ReadSafetensorsHeader(path);
  if (!h.ok()) return 0;
  FUZZ_CHECK(h->data_start >= 8 && h->data_start <= static_cast<int64_t>(size), "data_start inside the file");
  int64_t prev_end = 0;
  std::vector<char> buf;
  for (const ckpt::SafetensorsEntry& e : h->entries) {
    FUZZ_CHECK(e.begin >= prev_end && e.begin <= e.end, "entries sorted and disjoint");
    FUZZ_CHECK(h->data_start + e.end <= static_cast<int64_t>(size), "entry inside the file");
    FUZZ_CHECK(h->Find(e.key) != nullptr, "Find finds every entry");
    buf.resize(static_cast<size_t>(e.end - e.begin));
    Status st = ckpt::PreadAll(fd, buf.data(), buf.size(), h->data_start + e.begin, path);
    FUZZ_CHECK(st.ok(), "an accepted entry's bytes are readable");
    prev_end = e.end;
  }
  return 0;
}
