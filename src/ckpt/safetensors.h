// The subset of safetensors (https://github.com/huggingface/safetensors) that
// checkpoints use: F32 tensors only, header padded with spaces so that the data starts
// at a multiple of 4096 bytes (aligned for direct I/O, ckpt/direct_io.h), tensors
// stored in header order without holes. Internal to
// src/ckpt (and `checkpoint export`); the public API is ckpt/checkpoint.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/direct_io.h"
#include "common/status.h"

struct XXH3_state_s;  // <xxhash.h>

namespace elastrain::ckpt {

struct SafetensorsEntry {
  std::string key;
  std::string dtype;             // "F32" for everything we write
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;    // data_offsets: bytes relative to the data start
};

struct SafetensorsHeader {
  int64_t data_start = 0;        // 8 + header length: where the byte buffer begins
  std::vector<SafetensorsEntry> entries;  // sorted by begin
  std::map<std::string, std::string> metadata;
  const SafetensorsEntry* Find(const std::string& key) const;
};

// Reads and validates the header of `path` (length sane, JSON, offsets inside the
// file, no overlaps). Corruption/NotFound name the file.
Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

// Streams a file: Create (header), one Append per entry in order, Finish. Everything
// goes through one aligned block buffer written kIoBlockBytes at a time (direct I/O
// where the file system takes it), each entry's checksum computed on the block while
// it is copied in, so the data is read once. Destroying an unfinished writer removes
// its temp file. Not thread-safe; one per file (several may run in parallel).
class SafetensorsWriter {
 public:
  struct Entry {
    std::string key;
    std::vector<int64_t> shape;
  };
  // Opens `path.tmp`; InvalidArgument on duplicate keys, IOError naming the file.
  static Result<std::unique_ptr<SafetensorsWriter>> Create(const std::string& path, const std::vector<Entry>& entries,
                                                           const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The next entry's data (exactly its element count) and its XXH3 checksum (of the
  // bytes as copied into the block that is written).
  Result<uint64_t> Append(const float* data, int64_t n);
  // Writes the last block, fdatasync, rename onto `path`, fsync of the directory;
  // returns the file's size.
  Result<int64_t> Finish();
  // Absolute byte offset where entry i's data starts.
  int64_t DataOffset(size_t i) const { return data_start_ + offsets_[i]; }

 private:
  SafetensorsWriter() = default;
  Status Fail(Status st);  // closes and removes the temp file
  // Copies bytes into the block buffer (hashing them when `hash`), writing each full block.
  Status Put(const char* src, int64_t n, XXH3_state_s* hash);
  Status WriteBlock();  // block_[0, used_) at file_bytes_
  std::string path_, tmp_;
  int fd_ = -1;
  int64_t data_start_ = 0, written_ = 0;  // header bytes; data bytes appended
  AlignedBuffer block_;
  int64_t used_ = 0, file_bytes_ = 0;     // bytes in block_; bytes already written out
  bool padded_ = false;                   // the last write ran past the true size
  XXH3_state_s* hash_ = nullptr;
  std::vector<int64_t> offsets_, sizes_;  // per entry, bytes
  size_t next_ = 0;
};

// Reads exactly n bytes at `offset` (IOError/Corruption naming `path` on failure/EOF).
Status PreadAll(int fd, void* buf, size_t n, int64_t offset, const std::string& path);

}  // namespace elastrain::ckpt
