// Pre-tokenised corpora, memory-mapped read-only: llm.c's and nanoGPT's token files and
// Megatron-LM's indexed datasets. The parsers take bytes (the header, the whole .idx)
// and the file sizes, so that they are fuzzed without files (fuzz/fuzz_token_files.cpp);
// every count, offset and dtype code is checked against those sizes before anything is
// read through it, and every token id against the vocabulary at open.
//
// llm.c (dev/data/data_common.py, write_datafile), little-endian:
//   int32[256] header: [0] magic 20240520, [1] version (1: uint16 tokens, GPT-2's;
//              2: uint32 tokens, llm.c's llama3 files), [2] token count, the rest 0
//   tokens     count x uint16 or uint32, right after the 1024-byte header
// nanoGPT (data/*/prepare.py): the tokens alone, uint16, no header.
//
// Megatron-LM's MMIDIDX index (megatron/core/datasets/indexed_dataset.py, _IndexWriter),
// PREFIX.idx, little-endian:
//   0   char[9]  magic "MMIDIDX\0\0"
//   9   u64      version, 1
//   17  u8       dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
//                7 float32, 8 uint16 (floats are refused: they are no token ids)
//   18  u64      sequence count S
//   26  u64      document count D (entries of document_indices: documents + 1)
//   34  int32[S] sequence lengths (tokens)
//       int64[S] sequence pointers (byte offsets into PREFIX.bin)
//       int64[D] document indices: the first sequence of each document, then S
// PREFIX.bin holds the sequences' tokens. elastrain reads index files whose sequences
// lie back to back from byte 0 (as IndexedDatasetBuilder writes them) and whose .bin
// ends with the last one; a gap, an overlap or trailing bytes are refused (Corruption).
//
// Files must not change while they are mapped (a truncated file would fault the reader).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/dataset_type.h"
#include "common/status.h"

namespace elastrain {

enum class TokenDtype { kU8, kI8, kU16, kI16, kI32, kU32, kI64 };
size_t TokenDtypeBytes(TokenDtype d);
const char* TokenDtypeName(TokenDtype d);

// `count` token ids of one dtype at `data`, inside a mapping that outlives the span.
struct TokenSpan {
  const uint8_t* data = nullptr;
  int64_t count = 0;
  TokenDtype dtype = TokenDtype::kU16;
  // Token i (0 <= i < count), widened; unaligned reads are fine.
  int64_t At(int64_t i) const;
  // out[j] = At(first + j) for j < n, narrowed to int32 (ids were checked at open).
  void Copy(int64_t first, int64_t n, int32_t* out) const;
};

// A read-only memory mapping of a whole file (an empty file maps to nothing).
class MappedFile {
 public:
  static Result<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size) : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  uint64_t size_;
};

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr uint64_t kLlmcHeaderBytes = 256 * 4;

struct LlmcHeader {
  int32_t version = 0;  // 1 or 2
  TokenDtype dtype = TokenDtype::kU16;
  int64_t num_tokens = 0;
};
// Checks the header at the start of a `file_size`-byte file (`data` holds at least
// min(file_size, kLlmcHeaderBytes) bytes): magic, version, and a token count that fills
// the file exactly. Errors are Corruption naming `path` and the field.
Result<LlmcHeader> ParseLlmcHeader(const uint8_t* data, uint64_t file_size, const std::string& path);

inline constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kMegatronHeaderBytes = 34;

struct MegatronIndex {
  TokenDtype dtype = TokenDtype::kU16;
  int64_t num_sequences = 0;
  int64_t num_documents = 0;  // document_indices entries less one
  int64_t num_tokens = 0;     // sum of the sequence lengths: the .bin's tokens
};
// Parses and checks a whole .idx file (`idx`, `idx_size` bytes) against the size of its
// .bin. Errors are Corruption naming `idx_path` and the field, sequence or document.
Result<MegatronIndex> ParseMegatronIndex(const uint8_t* idx, uint64_t idx_size, uint64_t bin_size,
                                         const std::string& idx_path);

// The first token of `span` not in [0, vocab_size), or -1 (a parallel scan).
int64_t FirstTokenOutOfRange(const TokenSpan& span, int64_t vocab_size);

// One source file's tokens, mapped.
struct TokenFile {
  std::string path;  // the .bin (megatron: PREFIX.bin)
  std::shared_ptr<const MappedFile> map;
  TokenSpan tokens;
  std::string format;  // for the log: "llm.c v1 uint16", "megatron uint16, 12 documents"
};

// The files of `path` for `type` (llmc, nanogpt, megatron), in sorted order:
//  llmc, nanogpt: a file; a directory: its *.bin files (recursively); or a glob.
//  megatron: a PREFIX (PREFIX.bin and PREFIX.idx), either file of a pair; a directory:
//    every *.idx under it; or a glob of .idx/.bin files. Returns the prefixes.
Result<std::vector<std::string>> ListTokenFiles(DatasetType type, const std::string& path);

// Maps one file and checks it: its header or index, and that every token id is below
// `vocab_size` (the first offending token is named by its index and byte offset).
Result<TokenFile> OpenTokenFile(DatasetType type, const std::string& file, int64_t vocab_size);

}  // namespace elastrain
