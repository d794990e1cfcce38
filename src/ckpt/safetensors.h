// The subset of safetensors (https://github.com/huggingface/safetensors) that
// checkpoints use: F32 tensors only, header padded with spaces to a multiple of 8 so
// that data is aligned, tensors stored in header order without holes. Internal to
// src/ckpt (and `checkpoint export`); the public API is ckpt/checkpoint.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

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

// Streams a file: Create (header written), one Append per entry in order, Finish.
// Destroying an unfinished writer removes its temp file. Not thread-safe; one per file.
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

  // The next entry's data (exactly its element count) and its XXH3 checksum.
  Result<uint64_t> Append(const float* data, int64_t n);
  // fsync, rename onto `path`, fsync the directory; returns the file's size.
  Result<int64_t> Finish();
  // Absolute byte offset where entry i's data starts.
  int64_t DataOffset(size_t i) const { return data_start_ + offsets_[i]; }

 private:
  SafetensorsWriter() = default;
  Status Fail(Status st);  // closes and removes the temp file
  std::string path_, tmp_;
  int fd_ = -1;
  int64_t data_start_ = 0, written_ = 0;
  std::vector<int64_t> offsets_, sizes_;  // per entry, bytes
  size_t next_ = 0;
};

// Reads exactly n bytes at `offset` (IOError/Corruption naming `path` on failure/EOF).
Status PreadAll(int fd, void* buf, size_t n, int64_t offset, const std::string& path);

}  // namespace elastrain::ckpt
