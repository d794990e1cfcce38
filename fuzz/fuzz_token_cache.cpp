// The token cache file (src/data/token_cache.h), read by LoadOrBuildTokens. The input is
// a cache file; the harness puts it where the cache of a fixed one-file corpus (byte
// tokenizer) lives, in a private temp directory, and loads. The cache key and payload
// checksum fields (bytes 24..40) are overwritten with the values that match, so the
// fuzzer reaches the payload checks instead of stopping at a hash it cannot guess (the
// mismatch paths are one comparison each, covered by unit tests).
// Properties: tokens loaded from the cache are in the vocabulary; a refused cache file
// falls back to tokenising the corpus, which gives the corpus's bytes.
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/files.h"
#include "data/token_cache.h"
#include "data/tokenizer.h"
#include "fuzz_check.h"

using namespace elastrain;

namespace {
struct Fixture {
  std::string dir, cache_dir, cache_path;
  std::vector<std::string> files;
  uint64_t key = 0;
  ByteTokenizer tokenizer;
  std::string corpus = "the quick brown fox\njumps over the lazy dog\n";
};

Fixture& Get() {
  static Fixture* f = [] {
    auto* f = new Fixture;
    // tmpfs when there is one: the cache is written (and fsync'd) for every input.
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    std::string tmpl = (base / "fuzz_token_cache.XXXXXX").string();
    FUZZ_CHECK(mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    f->dir = tmpl;
    f->cache_dir = f->dir + "/cache";
    f->files = {f->dir + "/corpus.txt"};
    FUZZ_CHECK(WriteFileAtomic(f->files[0], f->corpus).ok(), "write the corpus");
    Result<uint64_t> key = TokenCacheKey(f->tokenizer, f->files);
    FUZZ_CHECK(key.ok(), "TokenCacheKey");
    f->key = *key;
    f->cache_path = f->cache_dir + "/tokens-" + HexU64(f->key) + ".bin";
    std::filesystem::create_directories(f->cache_dir);
    std::atexit([] { std::filesystem::remove_all(Get().dir); });
    return f;
  }();
  return *f;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // a refused cache file is logged
  Get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = Get();
  std::string file = fuzz::AsString(data, size);
  if (file.size() >= 32) std::memcpy(file.data() + 24, &f.key, 8);
  if (file.size() >= kTokenCacheHeaderBytes) {
    const uint64_t sum = Hash64(file.data() + kTokenCacheHeaderBytes, file.size() - kTokenCacheHeaderBytes);
    std::memcpy(file.data() + 32, &sum, 8);
  }
  FUZZ_CHECK(WriteFileAtomic(f.cache_path, file).ok(), "write the cache file");
  Result<TokenStream> s = LoadOrBuildTokens(f.tokenizer, f.files, f.cache_dir);
  FUZZ_CHECK(s.ok(), "a bad cache file is rebuilt, not an error");
  if (s->loaded_from_cache) {
    for (int32_t t : s->tokens) FUZZ_CHECK(t >= 0 && t < f.tokenizer.vocab_size(), "cached tokens are in the vocabulary");
  } else {
    FUZZ_CHECK(f.tokenizer.Decode(s->tokens) == f.corpus, "a rebuild tokenises the corpus");
  }
  return 0;
}
