// Large aligned I/O for checkpoint data, bypassing the page cache (O_DIRECT) where the
// file system allows it. Internal to src/ckpt.
//
// Why: on the hosts measured (docs/checkpoint-format.md, "Speed"), copying a save into
// the page cache cost the writer more CPU time than the disk needed to store it, so the
// copy, not the disk, set the pace; the restore likewise. With O_DIRECT the device reads
// our block straight from memory. A file system without O_DIRECT (tmpfs on older
// kernels, some FUSE mounts) gets the same blocks through the page cache; nothing else
// changes. Every call is bounded by the size it is given (no waiting on anything but
// the disk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace elastrain::ckpt {

// Alignment of offsets, sizes and addresses of direct I/O (covers 512 B and 4 KiB
// logical blocks); and the size of one read or write: large enough that a request's
// overhead is small next to its transfer, small enough to stay in the CPU's caches
// while it is hashed.
inline constexpr int64_t kIoAlign = 4096;
inline constexpr int64_t kIoBlockBytes = int64_t{8} << 20;

inline int64_t RoundUpToIoAlign(int64_t n) { return (n + kIoAlign - 1) / kIoAlign * kIoAlign; }

// A heap buffer of `bytes` (a multiple of kIoAlign), aligned to kIoAlign.
struct AlignedFree {
  void operator()(char* p) const;
};
using AlignedBuffer = std::unique_ptr<char[], AlignedFree>;
AlignedBuffer AllocateAligned(int64_t bytes);

// Turns on O_DIRECT for `fd` if its file system takes it; false if not (the fd is
// unchanged and works as before). HasDirectIo: whether it is on.
bool TryEnableDirectIo(int fd);
bool HasDirectIo(int fd);

// Writes buf[0, n) at `offset`. With O_DIRECT on `fd`, `offset` must be aligned and the
// write is padded with zeros up to RoundUpToIoAlign(n) (buf must have that room; the
// caller truncates the file to its true size at the end). If the file system refuses
// the direct write (EINVAL), O_DIRECT is turned off for `fd` and the write goes through
// the page cache. Returns the bytes written (n or its padded size); IOError naming
// `path` otherwise (ENOSPC included).
Result<int64_t> WriteBlockAt(int fd, char* buf, int64_t n, int64_t offset, const std::string& path);

// Writes head[0, head_n) then buf[0, n) at `offset` in one call (pwritev), without a
// copy: for data already in aligned memory. Every address, size and the offset must be
// aligned to kIoAlign (head_n may be 0). Falls back as WriteBlockAt does.
Status WriteAlignedAt(int fd, const char* head, int64_t head_n, const char* buf, int64_t n, int64_t offset,
                      const std::string& path);

// Reads bytes [offset, offset + n) of `fd` into dst[0, n), calling `filled(p, len)` on
// each part of dst as soon as it holds its data (in order, at most kIoBlockBytes each:
// still in the CPU's caches, e.g. to hash it). With O_DIRECT on `fd` it reads the
// aligned blocks around the range into a staging buffer of this thread and copies the
// range out; else pread straight into dst. Corruption "truncated: end of file at byte
// B" naming `path` when the file ends first; IOError on a failed read.
Status ReadRangeInto(int fd, int64_t offset, int64_t n, char* dst, const std::string& path,
                     const std::function<void(const char* p, int64_t len)>& filled);

}  // namespace elastrain::ckpt
