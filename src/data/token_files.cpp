#include "data/token_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <set>

#include "data/corpus.h"

namespace elastrain {
namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "token files are little-endian");

namespace {
template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

Status Bad(const std::string& path, const std::string& why) { return Status::Corruption(path + ": " + why); }

std::string StripSuffix(const std::string& s, const std::string& suffix) {
  const bool ends = s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  return ends ? s.substr(0, s.size() - suffix.size()) : s;
}

Result<TokenDtype> MegatronDtype(uint8_t code, const std::string& path) {
  switch (code) {
    case 1: return TokenDtype::kU8;
    case 2: return TokenDtype::kI8;
    case 3: return TokenDtype::kI16;
    case 4: return TokenDtype::kI32;
    case 5: return TokenDtype::kI64;
    case 8: return TokenDtype::kU16;
    case 6:
    case 7:
      return Bad(path, "dtype code " + std::to_string(code) + " is a floating-point type, not token ids");
    default:
      return Bad(path, "unknown dtype code " + std::to_string(code) +
                           " (expected 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64 or 8 uint16)");
  }
}
}  // namespace

size_t TokenDtypeBytes(TokenDtype d) {
  switch (d) {
    case TokenDtype::kU8:
    case TokenDtype::kI8: return 1;
    case TokenDtype::kU16:
    case TokenDtype::kI16: return 2;
    case TokenDtype::kI32:
    case TokenDtype::kU32: return 4;
    case TokenDtype::kI64: return 8;
  }
  return 1;
}

const char* TokenDtypeName(TokenDtype d) {
  switch (d) {
    case TokenDtype::kU8: return "uint8";
    case TokenDtype::kI8: return "int8";
    case TokenDtype::kU16: return "uint16";
    case TokenDtype::kI16: return "int16";
    case TokenDtype::kI32: return "int32";
    case TokenDtype::kU32: return "uint32";
    case TokenDtype::kI64: return "int64";
  }
  return "?";
}

int64_t TokenSpan::At(int64_t i) const {
  const uint8_t* p = data + static_cast<size_t>(i) * TokenDtypeBytes(dtype);
  switch (dtype) {
    case TokenDtype::kU8: return *p;
    case TokenDtype::kI8: return static_cast<int8_t>(*p);
    case TokenDtype::kU16: return Load<uint16_t>(p);
    case TokenDtype::kI16: return Load<int16_t>(p);
    case TokenDtype::kI32: return Load<int32_t>(p);
    case TokenDtype::kU32: return Load<uint32_t>(p);
    case TokenDtype::kI64: return Load<int64_t>(p);
  }
  return 0;
}

void TokenSpan::Copy(int64_t first, int64_t n, int32_t* out) const {
  if (dtype == TokenDtype::kU16) {  // the common case, a loop the compiler vectorises
    const uint8_t* p = data + static_cast<size_t>(first) * 2;
    for (int64_t j = 0; j < n; ++j) out[j] = Load<uint16_t>(p + 2 * j);
    return;
  }
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<int32_t>(At(first + j));
}

Result<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      return Status::IOError(path + ": cannot map " + std::to_string(size) + " bytes (" + err + ")");
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<LlmcHeader> ParseLlmcHeader(const uint8_t* data, uint64_t file_size, const std::string& path) {
  if (file_size < kLlmcHeaderBytes)
    return Bad(path, "file of " + std::to_string(file_size) + " bytes is shorter than llm.c's 1024-byte header" +
                         " (a headerless nanoGPT file: dataset_type=nanogpt)");
  const int32_t magic = Load<int32_t>(data);
  if (magic != kLlmcMagic)
    return Bad(path, "magic " + std::to_string(magic) + ", expected llm.c's " + std::to_string(kLlmcMagic) +
                         " (a headerless nanoGPT file: dataset_type=nanogpt)");
  LlmcHeader h;
  h.version = Load<int32_t>(data + 4);
  if (h.version != 1 && h.version != 2)
    return Bad(path, "version " + std::to_string(h.version) + ", expected 1 (uint16 tokens) or 2 (uint32 tokens)");
  h.dtype = h.version == 1 ? TokenDtype::kU16 : TokenDtype::kU32;
  // int32 in llm.c's writer; read as unsigned so that a negative count is a clear mismatch.
  h.num_tokens = Load<uint32_t>(data + 8);
  const uint64_t elem = TokenDtypeBytes(h.dtype);
  const uint64_t payload = file_size - kLlmcHeaderBytes;
  if (payload % elem != 0 || payload / elem != static_cast<uint64_t>(h.num_tokens))
    return Bad(path, "header says " + std::to_string(h.num_tokens) + " tokens of " + std::to_string(elem) +
                         " bytes, the file holds " + std::to_string(payload) + " bytes after the header");
  return h;
}

Result<MegatronIndex> ParseMegatronIndex(const uint8_t* idx, uint64_t idx_size, uint64_t bin_size,
                                         const std::string& path) {
  if (idx_size < kMegatronHeaderBytes)
    return Bad(path, "file of " + std::to_string(idx_size) + " bytes is shorter than the 34-byte MMIDIDX header");
  if (std::memcmp(idx, kMegatronMagic, sizeof(kMegatronMagic)) != 0)
    return Bad(path, "bad magic, expected Megatron's \"MMIDIDX\\x00\\x00\"");
  if (uint64_t v = Load<uint64_t>(idx + 9); v != 1)
    return Bad(path, "index version " + std::to_string(v) + ", expected 1");
  MegatronIndex m;
  ELASTRAIN_ASSIGN_OR_RETURN(m.dtype, MegatronDtype(idx[17], path));
  const uint64_t seqs = Load<uint64_t>(idx + 18), docs = Load<uint64_t>(idx + 26);
  // Each count is bounded by the bytes its array needs, so no product below overflows.
  const uint64_t room = idx_size - kMegatronHeaderBytes;
  if (seqs > room / 12 || docs > (room - seqs * 12) / 8 || room != seqs * 12 + docs * 8)
    return Bad(path, "header says " + std::to_string(seqs) + " sequences and " + std::to_string(docs) +
                         " document indices (" + std::to_string(kMegatronHeaderBytes) + " + 12 x sequences + 8 x " +
                         "documents bytes), the file has " + std::to_string(idx_size) + " bytes");
  if (docs < 1) return Bad(path, "no document indices (expected at least [0])");
  m.num_sequences = static_cast<int64_t>(seqs);
  m.num_documents = static_cast<int64_t>(docs) - 1;
  const uint8_t* sizes = idx + kMegatronHeaderBytes;
  const uint8_t* pointers = sizes + seqs * 4;
  const uint8_t* doc_idx = pointers + seqs * 8;
  const uint64_t elem = TokenDtypeBytes(m.dtype);
  // Sequences back to back from byte 0: pointer[i] is where sequence i-1 ends.
  uint64_t end = 0;
  for (uint64_t i = 0; i < seqs; ++i) {
    const int32_t len = Load<int32_t>(sizes + 4 * i);
    const int64_t ptr = Load<int64_t>(pointers + 8 * i);
    if (len < 0) return Bad(path, "sequence " + std::to_string(i) + " has length " + std::to_string(len));
    if (ptr < 0 || static_cast<uint64_t>(ptr) != end)
      return Bad(path, "sequence " + std::to_string(i) + " starts at byte " + std::to_string(ptr) + " of the .bin, " +
                           "expected " + std::to_string(end) + " (where the one before ends: elastrain reads " +
                           "sequences stored back to back, as Megatron's IndexedDatasetBuilder writes them)");
    const uint64_t bytes = static_cast<uint64_t>(len) * elem;
    if (bytes > bin_size - end)
      return Bad(path, "sequence " + std::to_string(i) + " (" + std::to_string(len) + " tokens at byte " +
                           std::to_string(end) + ") ends past the end of the .bin (" + std::to_string(bin_size) +
                           " bytes)");
    end += bytes;
  }
  if (end != bin_size)
    return Bad(path, "the sequences end at byte " + std::to_string(end) + ", the .bin has " +
                         std::to_string(bin_size) + " bytes");
  m.num_tokens = static_cast<int64_t>(end / elem);
  int64_t prev = 0;
  for (uint64_t d = 0; d < docs; ++d) {
    const int64_t first = Load<int64_t>(doc_idx + 8 * d);
    const bool ok = d == 0 ? first == 0 : (first >= prev && static_cast<uint64_t>(first) <= seqs);
    if (!ok)
      return Bad(path, "document index " + std::to_string(d) + " is " + std::to_string(first) +
                           ", expected non-decreasing sequence numbers from 0 to " + std::to_string(seqs));
    prev = first;
  }
  if (static_cast<uint64_t>(prev) != seqs)
    return Bad(path, "the last document index is " + std::to_string(prev) + ", expected the sequence count " +
                         std::to_string(seqs));
  return m;
}

int64_t FirstTokenOutOfRange(const TokenSpan& span, int64_t vocab_size) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int64_t chunks = (span.count + kChunk - 1) / kChunk;
  int64_t first = INT64_MAX;
#pragma omp parallel for schedule(dynamic) reduction(min : first)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(span.count, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) {
      const int64_t t = span.At(i);
      if (t < 0 || t >= vocab_size) {
        first = std::min(first, i);
        break;
      }
    }
  }
  return first == INT64_MAX ? -1 : first;
}

Result<std::vector<std::string>> ListTokenFiles(DatasetType type, const std::string& path) {
  if (type != DatasetType::kMegatron) return ListDataFiles(path, ".bin", "token files");
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec) || fs::is_regular_file(path, ec) || LooksLikeGlob(path)) {
    ELASTRAIN_ASSIGN_OR_RETURN(files, ListDataFiles(path, ".idx", "Megatron .idx files"));
  } else {
    files = {path};  // a PREFIX
  }
  std::set<std::string> prefixes;  // each once, in order
  for (const std::string& f : files) prefixes.insert(StripSuffix(StripSuffix(f, ".idx"), ".bin"));
  for (const std::string& p : prefixes)
    if (!fs::is_regular_file(p + ".idx", ec) || !fs::is_regular_file(p + ".bin", ec))
      return Status::NotFound("dataset_path=" + path + ": " + p + ".bin and " + p +
                              ".idx are not both there (a Megatron dataset is a PREFIX of PREFIX.bin and PREFIX.idx)");
  return std::vector<std::string>(prefixes.begin(), prefixes.end());
}

Result<TokenFile> OpenTokenFile(DatasetType type, const std::string& file, int64_t vocab_size) {
  TokenFile f;
  if (type == DatasetType::kMegatron) {
    f.path = file + ".bin";
    ELASTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> idx, MappedFile::Open(file + ".idx"));
    ELASTRAIN_ASSIGN_OR_RETURN(f.map, MappedFile::Open(f.path));
    ELASTRAIN_ASSIGN_OR_RETURN(MegatronIndex m, ParseMegatronIndex(idx->data(), idx->size(), f.map->size(), idx->path()));
    f.tokens = {f.map->data(), m.num_tokens, m.dtype};
    f.format = std::string("megatron ") + TokenDtypeName(m.dtype) + ", " + std::to_string(m.num_documents) +
               " documents in " + std::to_string(m.num_sequences) + " sequences";
  } else {
    f.path = file;
    ELASTRAIN_ASSIGN_OR_RETURN(f.map, MappedFile::Open(file));
    if (type == DatasetType::kLlmc) {
      ELASTRAIN_ASSIGN_OR_RETURN(LlmcHeader h, ParseLlmcHeader(f.map->data(), f.map->size(), file));
      f.tokens = {f.map->data() + kLlmcHeaderBytes, h.num_tokens, h.dtype};
      f.format = "llm.c v" + std::to_string(h.version) + " " + TokenDtypeName(h.dtype);
    } else {
      if (f.map->size() % 2 != 0)
        return Bad(file, "a nanoGPT token file holds uint16 tokens, but has an odd size of " +
                             std::to_string(f.map->size()) + " bytes");
      if (f.map->size() >= kLlmcHeaderBytes && ParseLlmcHeader(f.map->data(), f.map->size(), file).ok())
        return Status::InvalidArgument(file + ": has llm.c's header (magic " + std::to_string(kLlmcMagic) +
                                       "): read it with dataset_type=llmc, not nanogpt");
      f.tokens = {f.map->data(), static_cast<int64_t>(f.map->size() / 2), TokenDtype::kU16};
      f.format = "nanoGPT uint16";
    }
  }
  if (int64_t bad = FirstTokenOutOfRange(f.tokens, vocab_size); bad >= 0) {
    const uint64_t offset = static_cast<uint64_t>(f.tokens.data - (f.map->data() ? f.map->data() : f.tokens.data)) +
                            static_cast<uint64_t>(bad) * TokenDtypeBytes(f.tokens.dtype);
    return Status::InvalidArgument(f.path + ": token " + std::to_string(bad) + " (byte offset " +
                                   std::to_string(offset) + ") is " + std::to_string(f.tokens.At(bad)) +
                                   ", not below vocab_size=" + std::to_string(vocab_size) +
                                   " (the tokenizer that wrote the file has a larger vocabulary than the model)");
  }
  return f;
}

}  // namespace elastrain
