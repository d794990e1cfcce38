// A file descriptor that a loop blocked in poll() can be woken through: Notify() from
// any thread or a signal handler (one write(2) to an eventfd: async-signal-safe), and
// the loop, which polls fd() for POLLIN, calls Drain() once woken. Wakes coalesce: many
// Notify() calls before a Drain() wake the loop once. Close-on-exec, so child processes
// do not inherit it.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace elastrain {

class Wakeup {
 public:
  Wakeup() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Wakeup() {
    if (fd_ >= 0) ::close(fd_);
  }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // -1 when eventfd failed (out of descriptors): then Notify does nothing and the loop
  // only wakes at its poll timeout.
  int fd() const { return fd_; }
  void Notify() const {
    const uint64_t one = 1;
    if (fd_ >= 0) (void)!::write(fd_, &one, sizeof(one));
  }
  void Drain() const {
    uint64_t n = 0;
    if (fd_ >= 0) (void)!::read(fd_, &n, sizeof(n));
  }

 private:
  const int fd_;
};

}  // namespace elastrain
