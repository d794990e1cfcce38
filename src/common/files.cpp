#include "common/files.h"

#include "common/safe_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace elastrain {
namespace fs = std::filesystem;

Result<std::string> ReadFile(const std::string& path) {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) {
    if (fd.status().code() == StatusCode::kPermissionDenied) return fd.status();
    return Status::NotFound(fd.status().message());
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd->get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError(path + ": read failed (" + std::strerror(errno) + ")");
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

static Status WriteAll(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(path + ": write failed (" + std::strerror(errno) + ")");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status WriteFileAtomic(const std::string& path, const std::string& data, std::optional<unsigned> mode) {
  ELASTRAIN_ASSIGN_OR_RETURN(ParentDir parent, OpenParent(path, /*create_dirs=*/false));
  const int dir = parent.dir.get();
  const std::string tmp = parent.leaf + ".tmp." + std::to_string(::getpid());
  const std::string shown_tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlinkat(dir, tmp.c_str(), 0);  // a leftover of a crashed writer with our pid
  // O_EXCL | O_NOFOLLOW: never write through a file or link that someone put there.
  const int fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode.value_or(0644));
  if (fd < 0) return Status::IOError(shown_tmp + ": cannot create (" + std::strerror(errno) + ")");
  Status st = Status::OK();
  if (mode && ::fchmod(fd, *mode) != 0)
    st = Status::IOError(shown_tmp + ": cannot set its mode (" + std::strerror(errno) + ")");
  if (st.ok()) st = WriteAll(fd, data.data(), data.size(), shown_tmp);
  if (st.ok() && ::fsync(fd) != 0) st = Status::IOError(shown_tmp + ": fsync failed (" + std::strerror(errno) + ")");
  ::close(fd);
  // renameat replaces `path` itself, even where `path` is a link: nothing behind it is touched.
  if (st.ok() && ::renameat(dir, tmp.c_str(), dir, parent.leaf.c_str()) != 0)
    st = Status::IOError(path + ": rename failed (" + std::strerror(errno) + ")");
  if (!st.ok()) {
    ::unlinkat(dir, tmp.c_str(), 0);
    return st;
  }
  // The rename is durable once the directory is; an O_PATH descriptor cannot fsync.
  const int dfd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::OK();
}

Status MakeDirs(const std::string& path) { return MakeDirectories(path); }

bool FileExists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

bool OnReadOnlyFileSystem(const std::string& path) {
  struct statvfs fs {};
  return ::statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0;
}

Result<std::vector<std::string>> ListFilesRecursive(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  if (ec) return Status::IOError(dir + ": cannot list directory (" + ec.message() + ")");
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t Hash64(const void* data, size_t size, uint64_t seed) { return XXH3_64bits_withSeed(data, size, seed); }

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string HexU64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Result<bool> CreateFileExclusive(const std::string& path, const std::string& text, unsigned mode,
                                 const std::string& what) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Status::IOError("cannot create " + what + " " + tmp + ": " + std::strerror(errno));
  const bool ok = ::fchmod(fd, mode) == 0 &&  // the umask may have taken bits away
                  ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int write_errno = errno;
  ::close(fd);  // closed before the link
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::IOError("cannot write " + what + " " + tmp + ": " + std::strerror(write_errno));
  }
  // link() never replaces: whoever links first wins, and a link planted at `path` makes
  // it fail (EEXIST) rather than be followed.
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked == 0) return true;
  if (link_errno == EEXIST) return false;
  return Status::IOError("cannot create " + what + " " + path + ": " + std::strerror(link_errno));
}

}  // namespace elastrain
