// The token cache: a corpus tokenised once and stored as a binary file under a cache
// directory the caller owns (`<base_output_directory>/.cache/`), never beside the data.
//
// File `tokens-<key>.bin`, key = xxHash of (tokenizer id, each file's path, size and
// content hash), so any change to the tokenizer or the corpus picks a new file.
// Layout, little-endian (kTokenCacheHeaderBytes = 48):
//   0  char[8]  magic "ELTOKENS"
//   8  u32      format version (kTokenCacheVersion)
//   12 u32      dtype: 1 = uint16, 2 = int32 (uint16 whenever the vocabulary fits)
//   16 u64      token count
//   24 u64      cache key (must match the file name's)
//   32 u64      xxHash of the payload
//   40 u64      vocab size of the tokenizer
//   48 payload  token ids
// A file that fails any check is logged, ignored and rebuilt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "data/tokenizer.h"

namespace elastrain {

inline constexpr uint32_t kTokenCacheVersion = 1;
inline constexpr size_t kTokenCacheHeaderBytes = 48;

struct TokenStream {
  std::vector<int32_t> tokens;  // every file's tokens, concatenated in file order
  std::string cache_path;       // empty when no cache directory was given
  bool loaded_from_cache = false;
};

// How a file's content becomes the text to tokenise (JSONL: its documents' text field);
// none: the content itself. `id` names the extraction in the cache key ("jsonl:text"), so
// another field or reader gets another cache file. `extract` is called from several
// threads at once.
struct TextExtractor {
  std::string id;
  std::function<Result<std::string>(const std::string& path, const std::string& content)> extract;
};

// Cache key of `files` tokenised by `tokenizer` (reads every file to hash it).
Result<uint64_t> TokenCacheKey(const Tokenizer& tokenizer, const std::vector<std::string>& files,
                               const TextExtractor* extractor = nullptr);

// Returns the tokens of `files`, from `cache_dir` when a valid cache file is there,
// otherwise tokenising them (the text `extractor` takes from each, when given) and
// writing the cache (atomically). Empty `cache_dir`: tokenise without caching. Errors
// name the file.
Result<TokenStream> LoadOrBuildTokens(const Tokenizer& tokenizer, const std::vector<std::string>& files,
                                      const std::string& cache_dir, const TextExtractor* extractor = nullptr);

}  // namespace elastrain
