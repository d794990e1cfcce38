#include "common/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/safe_path.h"

namespace elastrain {

namespace {

bool InMyGroups(gid_t gid) {
  if (gid == getegid()) return true;
  const int n = getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  const int got = getgroups(n, groups.data());
  for (int i = 0; i < got; ++i)
    if (groups[static_cast<size_t>(i)] == gid) return true;
  return false;
}

}  // namespace

Result<bool> CheckMountedSecret(int fd, const std::string& what) {
  struct statvfs fs {};
  if (fstatvfs(fd, &fs) != 0) return Status::IOError(fmt::format("cannot stat the file system of {}: {}", what, std::strerror(errno)));
  if ((fs.f_flag & ST_RDONLY) == 0) return false;
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::IOError(fmt::format("cannot stat {}: {}", what, std::strerror(errno)));
  const mode_t mode = st.st_mode & 07777;
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("{} (a mounted secret: read-only file system, mode {:04o}, uid {}, gid "
                                               "{}) {}; expected a regular file owned by root or uid {}, mode 0400 or "
                                               "0440 (Kubernetes: defaultMode 0440 with the pod's fsGroup)",
                                               what, mode, st.st_uid, st.st_gid, why, geteuid()));
  };
  if (!S_ISREG(st.st_mode)) return refuse("is not a regular file");
  if (st.st_uid != 0 && st.st_uid != geteuid()) return refuse("is owned by another user");
  if ((mode & 07) != 0) return refuse("is open to other users");
  if ((mode & (S_IWGRP | S_IXGRP | S_ISUID | S_ISGID)) != 0) return refuse("is writable, executable or set-id for its group");
  if ((mode & S_IRGRP) != 0 && !InMyGroups(st.st_gid)) return refuse("is readable by a group this process is not in");
  return true;
}

Result<bool> CheckMountedSecretPath(const std::string& path, const std::string& what) {
  // O_NONBLOCK: a FIFO at the path must not block the open; the check refuses it.
  UniqueFd f(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (f.get() < 0) return Status::InvalidArgument(fmt::format("cannot open {}: {}", what, std::strerror(errno)));
  return CheckMountedSecret(f.get(), what);
}

}  // namespace elastrain
