#include "data/llmc_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "data/token_files.h"

namespace elastrain {

namespace {
constexpr size_t kBufferBytes = 4 << 20;

void FreeState(XXH3_state_s* s) { XXH3_freeState(s); }

Status WriteAll(int fd, const char* data, size_t n, off_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t w = offset >= 0 ? ::pwrite(fd, data, n, offset) : ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(path + ": cannot write (" + std::strerror(errno) + ")");
    }
    data += w;
    n -= static_cast<size_t>(w);
    if (offset >= 0) offset += w;
  }
  return Status::OK();
}
}  // namespace

LlmcShardWriter::LlmcShardWriter(std::string dir, int version, int64_t shard_tokens)
    : dir_(std::move(dir)), version_(version), shard_tokens_(shard_tokens), hash_(XXH3_createState(), FreeState) {}

LlmcShardWriter::~LlmcShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

Status LlmcShardWriter::Open() {
  const std::string name = fmt::format("shard_{:06d}.bin", shards_.size());
  tmp_path_ = (std::filesystem::path(dir_) / (name + ".tmp")).string();
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) return Status::IOError(tmp_path_ + ": cannot create (" + std::strerror(errno) + ")");
  const std::string header(kLlmcHeaderBytes, '\0');  // filled in at Close
  ELASTRAIN_RETURN_IF_ERROR(WriteAll(fd_, header.data(), header.size(), -1, tmp_path_));
  XXH3_64bits_reset_withSeed(hash_.get(), 0);
  count_ = 0;
  return Status::OK();
}

Status LlmcShardWriter::Flush() {
  if (buffer_.empty()) return Status::OK();
  XXH3_64bits_update(hash_.get(), buffer_.data(), buffer_.size());
  ELASTRAIN_RETURN_IF_ERROR(WriteAll(fd_, buffer_.data(), buffer_.size(), -1, tmp_path_));
  buffer_.clear();
  return Status::OK();
}

Status LlmcShardWriter::Close() {
  ELASTRAIN_RETURN_IF_ERROR(Flush());
  int32_t header[3] = {kLlmcMagic, version_, static_cast<int32_t>(count_)};
  ELASTRAIN_RETURN_IF_ERROR(WriteAll(fd_, reinterpret_cast<const char*>(header), sizeof(header), 0, tmp_path_));
  if (::fsync(fd_) != 0) return Status::IOError(tmp_path_ + ": cannot fsync (" + std::strerror(errno) + ")");
  ::close(fd_);
  fd_ = -1;
  const std::string name = fmt::format("shard_{:06d}.bin", shards_.size());
  const std::string path = (std::filesystem::path(dir_) / name).string();
  if (::rename(tmp_path_.c_str(), path.c_str()) != 0)
    return Status::IOError(path + ": cannot rename into place (" + std::strerror(errno) + ")");
  shards_.push_back({name, count_, XXH3_64bits_digest(hash_.get())});
  return Status::OK();
}

Status LlmcShardWriter::Append(const std::vector<int32_t>& tokens) {
  const size_t width = version_ == 1 ? 2 : 4;
  for (size_t i = 0; i < tokens.size();) {
    if (fd_ < 0) ELASTRAIN_RETURN_IF_ERROR(Open());
    // Up to the end of this shard, at most a buffer's worth.
    const size_t n = std::min({tokens.size() - i, static_cast<size_t>(shard_tokens_ - count_), kBufferBytes / width});
    const size_t at = buffer_.size();
    buffer_.resize(at + n * width);
    char* out = buffer_.data() + at;
    for (size_t j = 0; j < n; ++j) {
      if (width == 2) {
        const uint16_t v = static_cast<uint16_t>(tokens[i + j]);
        std::memcpy(out + 2 * j, &v, 2);
      } else {
        const uint32_t v = static_cast<uint32_t>(tokens[i + j]);
        std::memcpy(out + 4 * j, &v, 4);
      }
    }
    i += n;
    count_ += static_cast<int64_t>(n);
    if (count_ == shard_tokens_) {
      ELASTRAIN_RETURN_IF_ERROR(Close());
    } else if (buffer_.size() >= kBufferBytes) {
      ELASTRAIN_RETURN_IF_ERROR(Flush());
    }
  }
  return Status::OK();
}

Status LlmcShardWriter::Finish() {
  if (fd_ >= 0) return Close();
  return Status::OK();
}

}  // namespace elastrain
