// Opening files without following symbolic links below a run directory.
//
// A run directory holds files that other people may have crafted (a shared file system,
// a copied run, a job submitted by someone else): a link planted there, say
// `events.jsonl -> ~/.bashrc`, must not make elastrain append to the file it points at.
// So run directories are *guarded*: once a process has named one (GuardDirectory: the
// controller, the agent, the worker and the CLI commands do so as soon as they know the
// run), every path below it is reached one component at a time with
// openat(O_NOFOLLOW): a link anywhere below the root, or as the root itself, is refused
// with an error naming it, never followed. The path up to the run directory is the
// user's own (base_output_directory), and is resolved as usual. To be written into, the
// root must be a directory owned by this user and not writable by others.
//
// Paths outside every guarded directory open as usual, except that a file created to be
// renamed into place (WriteFileAtomic's temporary) is created O_EXCL | O_NOFOLLOW, and
// appends never go through a link.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace elastrain {

// An open file descriptor, closed when it goes.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Guards `dir` (made absolute and normal) for this process's lifetime; idempotent.
void GuardDirectory(const std::string& dir);
// Whether `path` lies below (or is) a guarded directory.
bool IsGuarded(const std::string& path);

// The directory that holds `path`, open (O_PATH), and the last component of `path`.
struct ParentDir {
  UniqueFd dir;
  std::string leaf;
  bool guarded = false;  // below a guarded directory: open the leaf with O_NOFOLLOW
};
// With create_dirs, missing directories on the way are made (mode 0700, under the
// process's umask). With for_write, a guarded root must be the user's own and not
// writable by others (reading another user's run is fine; writing into it is not).
Result<ParentDir> OpenParent(const std::string& path, bool create_dirs, bool for_write = true);

// open(2) of `path` with `flags` (O_CLOEXEC added; O_NOFOLLOW added below a guarded
// directory, and whenever O_APPEND is asked). Errors name the path and the reason.
Result<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode = 0600);

// mkdir -p, refusing links below a guarded directory.
Status MakeDirectories(const std::string& path);

// `<run_dir>/logs`, made if missing: the workers' logs go there. A link there fails every
// worker's spawn (which an agent would retry for ever): InvalidArgument naming it.
Status MakeLogsDirectory(const std::string& run_dir);

}  // namespace elastrain
