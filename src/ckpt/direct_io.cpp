#include "ckpt/direct_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace elastrain::ckpt {

namespace {
std::string Errno() { return std::strerror(errno); }

void DisableDirectIo(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_DIRECT);
}

// This thread's staging buffer for direct reads (kIoBlockBytes + one alignment unit, as
// a range rarely starts on a block boundary), allocated on first use.
char* ReadStaging() {
  thread_local AlignedBuffer buf;
  if (!buf) buf = AllocateAligned(kIoBlockBytes + kIoAlign);
  return buf.get();
}
}  // namespace

bool HasDirectIo(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && (flags & O_DIRECT) != 0;
}

void AlignedFree::operator()(char* p) const { std::free(p); }

AlignedBuffer AllocateAligned(int64_t bytes) {
  void* p = std::aligned_alloc(kIoAlign, static_cast<size_t>(RoundUpToIoAlign(bytes)));
  if (p == nullptr) throw std::bad_alloc();
  return AlignedBuffer(static_cast<char*>(p));
}

bool TryEnableDirectIo(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0 && HasDirectIo(fd);
}

Result<int64_t> WriteBlockAt(int fd, char* buf, int64_t n, int64_t offset, const std::string& path) {
  int64_t size = n;
  if (HasDirectIo(fd)) {
    size = RoundUpToIoAlign(n);
    std::memset(buf + n, 0, static_cast<size_t>(size - n));
  }
  ELASTRAIN_RETURN_IF_ERROR(WriteAlignedAt(fd, buf, size, nullptr, 0, offset, path));
  return size;
}

Status WriteAlignedAt(int fd, const char* head, int64_t head_n, const char* buf, int64_t n, int64_t offset,
                      const std::string& path) {
  const int64_t size = head_n + n;
  int64_t done = 0;
  while (done < size) {
    // What is left of head, then of buf.
    iovec iov[2];
    int count = 0;
    if (done < head_n) iov[count++] = {const_cast<char*>(head + done), static_cast<size_t>(head_n - done)};
    const int64_t in_buf = std::max<int64_t>(done - head_n, 0);
    if (n > in_buf) iov[count++] = {const_cast<char*>(buf + in_buf), static_cast<size_t>(n - in_buf)};
    const ssize_t w = ::pwritev(fd, iov, count, offset + done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && HasDirectIo(fd)) {
      // The file system takes O_DIRECT at open but not this write: the page cache then.
      DisableDirectIo(fd);
      continue;
    }
    if (w <= 0)
      return Status::IOError(fmt::format("{}: write of {} bytes at byte {} failed ({})", path, size - done,
                                         offset + done, w < 0 ? Errno() : "nothing written"));
    done += w;
  }
  return Status::OK();
}

Status ReadRangeInto(int fd, int64_t offset, int64_t n, char* dst, const std::string& path,
                     const std::function<void(const char* p, int64_t len)>& filled) {
  auto truncated = [&](int64_t at) {
    return Status::Corruption(fmt::format("{}: truncated: end of file at byte {}", path, at));
  };
  auto failed = [&](int64_t at) {
    return Status::IOError(fmt::format("{}: read at byte {} failed ({})", path, at, Errno()));
  };
  int64_t done = 0;  // bytes of the range in dst
  while (done < n) {
    const int64_t at = offset + done;
    if (HasDirectIo(fd)) {
      // The aligned block around [at, ...): read into the staging buffer, copy out.
      char* stage = ReadStaging();
      const int64_t base = at / kIoAlign * kIoAlign, skip = at - base;
      const int64_t want = std::min<int64_t>(RoundUpToIoAlign(skip + (n - done)), kIoBlockBytes);
      const ssize_t r = ::pread(fd, stage, static_cast<size_t>(want), base);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EINVAL) {  // refused after all: the page cache then
        DisableDirectIo(fd);
        continue;
      }
      if (r < 0) return failed(at);
      if (r <= skip) return truncated(at);  // nothing of the range: as pread reports it
      const int64_t len = std::min<int64_t>(r - skip, n - done);
      std::memcpy(dst + done, stage + skip, static_cast<size_t>(len));
      if (filled) filled(dst + done, len);
      done += len;
      continue;
    }
    const int64_t want = std::min(kIoBlockBytes, n - done);
    int64_t got = 0;
    while (got < want) {
      const ssize_t r = ::pread(fd, dst + done + got, static_cast<size_t>(want - got), at + got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return failed(at + got);
      if (r == 0) return truncated(at + got);
      got += r;
    }
    if (filled) filled(dst + done, want);
    done += want;
  }
  return Status::OK();
}

}  // namespace elastrain::ckpt
