#include "data/token_cache.h"

#include <bit>
#include <cstring>
#include <filesystem>

#include "common/files.h"
#include "common/raw_bytes.h"
#include "common/log.h"

namespace elastrain {

static_assert(std::endian::native == std::endian::little, "the token cache format is little-endian");

namespace {
constexpr char kMagic[8] = {'E', 'L', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t kDtypeU16 = 1, kDtypeI32 = 2;


std::string Serialize(const std::vector<int32_t>& tokens, uint64_t key, int64_t vocab_size) {
  const uint32_t dtype = vocab_size <= 65536 ? kDtypeU16 : kDtypeI32;
  std::string payload;
  if (dtype == kDtypeU16) {
    payload.resize(tokens.size() * 2);
    for (size_t i = 0; i < tokens.size(); ++i) {
      uint16_t v = static_cast<uint16_t>(tokens[i]);
      std::memcpy(payload.data() + 2 * i, &v, 2);
    }
  } else {
    payload.assign(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  }
  std::string out(kMagic, sizeof(kMagic));
  PutRaw<uint32_t>(&out, kTokenCacheVersion);
  PutRaw<uint32_t>(&out, dtype);
  PutRaw<uint64_t>(&out, tokens.size());
  PutRaw<uint64_t>(&out, key);
  PutRaw<uint64_t>(&out, Hash64(payload.data(), payload.size()));
  PutRaw<uint64_t>(&out, static_cast<uint64_t>(vocab_size));
  out += payload;
  return out;
}

// Parses a cache file; any mismatch is Corruption with the reason.
Result<std::vector<int32_t>> Parse(const std::string& path, const std::string& data, uint64_t key,
                                   int64_t vocab_size) {
  auto bad = [&](const std::string& why) { return Status::Corruption(path + ": " + why); };
  if (data.size() < kTokenCacheHeaderBytes) return bad("shorter than the header");
  if (std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0) return bad("bad magic, expected ELTOKENS");
  if (uint32_t v = GetRaw<uint32_t>(data, 8); v != kTokenCacheVersion)
    return bad("format version " + std::to_string(v) + ", expected " + std::to_string(kTokenCacheVersion));
  const uint32_t dtype = GetRaw<uint32_t>(data, 12);
  if (dtype != kDtypeU16 && dtype != kDtypeI32) return bad("unknown dtype " + std::to_string(dtype));
  const uint64_t count = GetRaw<uint64_t>(data, 16);
  if (GetRaw<uint64_t>(data, 24) != key) return bad("cache key does not match");
  if (GetRaw<uint64_t>(data, 40) != static_cast<uint64_t>(vocab_size)) return bad("vocabulary size does not match");
  const size_t elem = dtype == kDtypeU16 ? 2 : 4;
  const size_t payload_bytes = data.size() - kTokenCacheHeaderBytes;
  if (count > payload_bytes / elem || count * elem != payload_bytes)
    return bad("payload is " + std::to_string(payload_bytes) + " bytes, header says " + std::to_string(count) +
               " tokens of " + std::to_string(elem) + " bytes");
  const char* payload = data.data() + kTokenCacheHeaderBytes;
  if (Hash64(payload, payload_bytes) != GetRaw<uint64_t>(data, 32)) return bad("payload checksum mismatch");
  std::vector<int32_t> tokens(count);
  for (size_t i = 0; i < count; ++i) {
    if (dtype == kDtypeU16) {
      uint16_t v;
      std::memcpy(&v, payload + 2 * i, 2);
      tokens[i] = v;
    } else {
      std::memcpy(&tokens[i], payload + 4 * i, 4);
    }
    if (tokens[i] < 0 || tokens[i] >= vocab_size) return bad("token id out of vocabulary");
  }
  return tokens;
}

// Reads every file, in parallel, and hands its text to `use(i, text)` on that thread;
// the first error in file order.
template <typename Use>
Status ForEachFileText(const std::vector<std::string>& files, Use use) {
  std::vector<Status> errors(files.size());
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < files.size(); ++i) {
    auto text = ReadFile(files[i]);
    errors[i] = text.ok() ? use(i, *text) : text.status();
  }
  for (const Status& st : errors) ELASTRAIN_RETURN_IF_ERROR(st);
  return Status::OK();
}

Result<std::vector<int32_t>> Tokenize(const Tokenizer& tokenizer, const std::vector<std::string>& files,
                                      const TextExtractor* extractor) {
  std::vector<std::vector<int32_t>> per_file(files.size());
  ELASTRAIN_RETURN_IF_ERROR(ForEachFileText(files, [&](size_t i, const std::string& content) {
    Result<std::string> extracted = extractor ? extractor->extract(files[i], content) : Result<std::string>(std::string());
    if (!extracted.ok()) return extracted.status();
    const std::string& text = extractor ? *extracted : content;
    auto ids = tokenizer.Encode(text);
    if (!ids.ok()) return Status::Internal(files[i] + ": " + ids.status().message());
    per_file[i] = std::move(*ids);
    return Status::OK();
  }));
  std::vector<int32_t> all;
  for (const auto& ids : per_file) all.insert(all.end(), ids.begin(), ids.end());
  return all;
}
}  // namespace

Result<uint64_t> TokenCacheKey(const Tokenizer& tokenizer, const std::vector<std::string>& files,
                               const TextExtractor* extractor) {
  std::vector<uint64_t> sizes(files.size()), hashes(files.size());
  ELASTRAIN_RETURN_IF_ERROR(ForEachFileText(files, [&](size_t i, const std::string& text) {
    sizes[i] = text.size();
    hashes[i] = Hash64(text.data(), text.size());
    return Status::OK();
  }));
  std::string material = tokenizer.id();
  material.push_back('\0');
  if (extractor) {  // absent from the keys of plain text, so their caches stay valid
    material += "extract:" + extractor->id;
    material.push_back('\0');
  }
  for (size_t i = 0; i < files.size(); ++i) {
    material += files[i];
    material.push_back('\0');
    PutRaw<uint64_t>(&material, sizes[i]);
    PutRaw<uint64_t>(&material, hashes[i]);
  }
  return Hash64(material.data(), material.size());
}

Result<TokenStream> LoadOrBuildTokens(const Tokenizer& tokenizer, const std::vector<std::string>& files,
                                      const std::string& cache_dir, const TextExtractor* extractor) {
  TokenStream out;
  if (cache_dir.empty()) {
    ELASTRAIN_ASSIGN_OR_RETURN(out.tokens, Tokenize(tokenizer, files, extractor));
    return out;
  }
  ELASTRAIN_ASSIGN_OR_RETURN(uint64_t key, TokenCacheKey(tokenizer, files, extractor));
  out.cache_path = (std::filesystem::path(cache_dir) / ("tokens-" + HexU64(key) + ".bin")).string();
  if (FileExists(out.cache_path)) {
    auto data = ReadFile(out.cache_path);
    auto tokens = data.ok() ? Parse(out.cache_path, *data, key, tokenizer.vocab_size())
                            : Result<std::vector<int32_t>>(data.status());
    if (tokens.ok()) {
      out.tokens = std::move(*tokens);
      out.loaded_from_cache = true;
      LOG_INFO("token cache: {} tokens from {}", out.tokens.size(), out.cache_path);
      return out;
    }
    LOG_WARN("token cache: ignoring and rebuilding {}", tokens.status().ToString());
  }
  ELASTRAIN_ASSIGN_OR_RETURN(out.tokens, Tokenize(tokenizer, files, extractor));
  ELASTRAIN_RETURN_IF_ERROR(MakeDirs(cache_dir));
  ELASTRAIN_RETURN_IF_ERROR(WriteFileAtomic(out.cache_path, Serialize(out.tokens, key, tokenizer.vocab_size())));
  LOG_INFO("token cache: tokenised {} files into {} tokens, wrote {}", files.size(), out.tokens.size(),
           out.cache_path);
  return out;
}

}  // namespace elastrain
