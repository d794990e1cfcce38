// The token-file readers (src/data/token_files.h), each on the same input:
//  - llm.c: the input is a whole .bin, opened through an in-memory file (memfd, read back
//    through /proc/self/fd/N) with OpenTokenFile, header, mapping and vocabulary check;
//  - nanoGPT: the same file, headerless;
//  - Megatron: the input less its last 8 bytes is a whole .idx, and those 8 bytes
//    (little-endian u64) are the size of its .bin, for ParseMegatronIndex.
// Properties: an accepted llm.c or nanoGPT file's token count fills the file and every
// token read is in [0, 256); an accepted index accounts for the .bin's bytes exactly and
// counts within the .idx.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "data/token_files.h"
#include "fuzz_check.h"

using namespace elastrain;

namespace {
constexpr int64_t kVocab = 256;

int MemFile() {
  static const int fd = memfd_create("fuzz_token_files", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0, "memfd_create");
  return fd;
}

void CheckOpened(const Result<TokenFile>& f, uint64_t header, size_t size) {
  if (!f.ok()) return;
  FUZZ_CHECK(header + static_cast<uint64_t>(f->tokens.count) * TokenDtypeBytes(f->tokens.dtype) == size,
             "the tokens fill the file");
  for (int64_t i = 0; i < f->tokens.count; ++i) {
    const int64_t t = f->tokens.At(i);
    FUZZ_CHECK(t >= 0 && t < kVocab, "an accepted file's tokens are in the vocabulary");
  }
  if (f->tokens.count > 0) {
    std::string out(static_cast<size_t>(f->tokens.count) * 4, '\0');
    f->tokens.Copy(0, f->tokens.count, reinterpret_cast<int32_t*>(out.data()));
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = MemFile();
  FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
  FUZZ_CHECK(size == 0 || pwrite(fd, data, size, 0) == static_cast<ssize_t>(size), "pwrite");
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  CheckOpened(OpenTokenFile(DatasetType::kLlmc, path, kVocab), kLlmcHeaderBytes, size);
  CheckOpened(OpenTokenFile(DatasetType::kNanoGpt, path, kVocab), 0, size);

  if (size >= 8) {
    uint64_t bin_size;
    std::memcpy(&bin_size, data + size - 8, 8);
    const uint64_t idx_size = size - 8;
    Result<MegatronIndex> m = ParseMegatronIndex(data, idx_size, bin_size, "fuzz.idx");
    if (m.ok()) {
      FUZZ_CHECK(static_cast<uint64_t>(m->num_tokens) * TokenDtypeBytes(m->dtype) == bin_size,
                 "the sequences account for the .bin");
      FUZZ_CHECK(kMegatronHeaderBytes + 12 * static_cast<uint64_t>(m->num_sequences) +
                         8 * static_cast<uint64_t>(m->num_documents + 1) ==
                     idx_size,
                 "the counts fill the .idx");
    }
  }
  return 0;
}
