#include "common/safe_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace elastrain {

namespace fs = std::filesystem;

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

std::mutex g_mu;
std::vector<fs::path> g_roots;  // GUARDED_BY(g_mu)

fs::path Normal(const std::string& p) {
  std::error_code ec;
  fs::path n = fs::absolute(p, ec).lexically_normal();
  if (!n.empty() && n.filename().empty()) n = n.parent_path();  // "dir/" -> "dir"
  return n;
}

// The components of `p` below `root`, or false when `p` is not below (or at) it.
bool Below(const fs::path& root, const fs::path& p, std::vector<std::string>* rest) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q)
    if (q == p.end() || *q != *r) return false;
  rest->clear();
  for (; q != p.end(); ++q) rest->push_back(q->string());
  return true;
}

// The guarded root that `p` lies below (the deepest one), or an empty path.
fs::path RootOf(const fs::path& p, std::vector<std::string>* rest) {
  std::lock_guard<std::mutex> lock(g_mu);
  fs::path best;
  std::vector<std::string> tmp;
  for (const fs::path& r : g_roots)
    if (Below(r, p, &tmp) && r.string().size() > best.string().size()) {
      best = r;
      *rest = tmp;
    }
  return best;
}

Status Errno(const std::string& what, const std::string& path) {
  const int e = errno;
  if (e == ELOOP || e == ENOTDIR)
    return Status::PermissionDenied(fmt::format(
        "{}: {} (elastrain does not follow symbolic links inside a run directory; expected a plain {})", path,
        e == ELOOP ? "is a symbolic link" : "is not a directory (or is a symbolic link)", what));
  if (e == ENOENT) return Status::NotFound(fmt::format("{}: cannot open {} (no such file or directory)", path, what));
  return Status::IOError(fmt::format("{}: cannot open {} ({})", path, what, std::strerror(e)));
}

// Opens (or, with create, makes and opens) the directory `name` under `at`, never a link.
Result<UniqueFd> StepInto(int at, const std::string& name, const std::string& shown, bool create) {
  if (name == "..") return Status::PermissionDenied(shown + ": '..' inside a run directory");
  if (create && ::mkdirat(at, name.c_str(), 0700) != 0 && errno != EEXIST) return Errno("directory", shown);
  const int fd = ::openat(at, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno("directory", shown);
  return UniqueFd(fd);
}

// The guarded root itself: a directory (not a link) owned by us, not writable by others.
Status CheckRoot(int fd, const fs::path& root) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Errno("directory", root.string());
  if (st.st_uid != ::geteuid())
    return Status::PermissionDenied(fmt::format("run directory {} is owned by uid {}, not by this user (uid {}); "
                                                "expected a directory of your own",
                                                root.string(), st.st_uid, ::geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return Status::PermissionDenied(fmt::format("run directory {} is writable by others (mode {:04o}); expected "
                                                "no group or other write permission (chmod go-w)",
                                                root.string(), st.st_mode & 07777));
  return Status::OK();
}

// A directory of the user's own choosing (outside, or above, every guarded one): its
// path is resolved as usual, links included.
Result<UniqueFd> OpenUserDirectory(const fs::path& dir, bool create) {
  std::error_code ec;
  if (create) fs::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot create directory ({})", dir.string(), ec.message()));
  const int fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("directory", dir.string());
  return UniqueFd(fd);
}

}  // namespace

void GuardDirectory(const std::string& dir) {
  const fs::path n = Normal(dir);
  std::lock_guard<std::mutex> lock(g_mu);
  for (const fs::path& r : g_roots)
    if (r == n) return;
  g_roots.push_back(n);
}

bool IsGuarded(const std::string& path) {
  std::vector<std::string> rest;
  return !RootOf(Normal(path), &rest).empty();
}

Result<ParentDir> OpenParent(const std::string& path, bool create_dirs, bool for_write) {
  const fs::path p = Normal(path);
  ParentDir out;
  out.leaf = p.filename().string();
  if (out.leaf.empty()) return Status::InvalidArgument(fmt::format("'{}': expected a file path", path));
  std::vector<std::string> rest;
  const fs::path root = RootOf(p, &rest);
  if (root.empty() || rest.empty()) {  // not below a guarded directory (or the root itself)
    ELASTRAIN_ASSIGN_OR_RETURN(out.dir, OpenUserDirectory(p.parent_path(), create_dirs));
    return out;
  }
  out.guarded = true;
  ELASTRAIN_ASSIGN_OR_RETURN(UniqueFd at, OpenUserDirectory(root.parent_path(), create_dirs));
  ELASTRAIN_ASSIGN_OR_RETURN(UniqueFd cur, StepInto(at.get(), root.filename().string(), root.string(), create_dirs));
  if (for_write) ELASTRAIN_RETURN_IF_ERROR(CheckRoot(cur.get(), root));
  fs::path shown = root;
  for (size_t i = 0; i + 1 < rest.size(); ++i) {
    shown /= rest[i];
    ELASTRAIN_ASSIGN_OR_RETURN(UniqueFd next, StepInto(cur.get(), rest[i], shown.string(), create_dirs));
    cur = std::move(next);
  }
  out.dir = std::move(cur);
  return out;
}

Result<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode) {
  const bool for_write = (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND)) != 0;
  ELASTRAIN_ASSIGN_OR_RETURN(ParentDir parent, OpenParent(path, /*create_dirs=*/false, for_write));
  int f = flags | O_CLOEXEC;
  if (parent.guarded || (flags & O_APPEND)) f |= O_NOFOLLOW;
  const int fd = ::openat(parent.dir.get(), parent.leaf.c_str(), f, mode);
  if (fd < 0) return Errno("file", path);
  return UniqueFd(fd);
}

Status MakeLogsDirectory(const std::string& run_dir) {
  const std::string logs = run_dir + "/logs";
  if (std::error_code ec; fs::is_symlink(fs::symlink_status(logs, ec)))
    return Status::InvalidArgument(logs + ": is a symbolic link; the workers' logs go there and elastrain does "
                                          "not follow links inside a run directory (remove the link)");
  return MakeDirectories(logs);
}

Status MakeDirectories(const std::string& path) {
  const fs::path p = Normal(path);
  std::vector<std::string> rest;
  if (RootOf(p, &rest).empty()) {
    std::error_code ec;
    fs::create_directories(p, ec);
    if (ec) return Status::IOError(fmt::format("{}: cannot create directory ({})", p.string(), ec.message()));
    return Status::OK();
  }
  // The parent walk makes and checks every directory up to `p`'s parent; then `p`.
  ELASTRAIN_ASSIGN_OR_RETURN(ParentDir parent, OpenParent((p / "x").string(), /*create_dirs=*/true));
  (void)parent;
  return Status::OK();
}

}  // namespace elastrain
