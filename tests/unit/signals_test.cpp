// common/signals.h: SIGTERM and SIGINT reach the handler on the signal thread, never
// interrupt another thread's blocking call, and without a handler do what they would
// have done. Each case runs in a forked child (the module changes the process's mask).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/signals.h"

namespace elastrain {
namespace {

// Runs `body` in a child; returns its wait status.
template <typename F>
int InChild(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(Signals, HandlerRunsOnItsOwnThreadAndBlockingCallsAreNotInterrupted) {
  const int status = InChild([] {
    StartSignalThread();
    std::atomic<bool> ran{false};
    std::atomic<bool> other_thread{false};
    const std::thread::id main_id = std::this_thread::get_id();
    SetSignalHandler(SIGTERM, [&](int sig) {
      other_thread = std::this_thread::get_id() != main_id;
      ran = sig == SIGTERM;
    });
    int fds[2];
    if (::pipe(fds) != 0) return 10;
    ::kill(::getpid(), SIGTERM);
    // Nothing is ever written: a handler run on this thread would end the wait early
    // with EINTR; the signal thread leaves it to time out.
    pollfd p{fds[0], POLLIN, 0};
    const auto t0 = std::chrono::steady_clock::now();
    const int r = ::poll(&p, 1, 300);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r != 0) return 11;  // interrupted (-1, EINTR) or spurious
    if (waited < 0.29) return 12;
    for (int i = 0; i < 100 && !ran; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!ran) return 13;
    if (!other_thread) return 14;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "11: poll interrupted, 12: returned early, 13: no handler call, "
                                       "14: handler on the main thread";
}

TEST(Signals, WithoutAHandlerTheProcessDiesOfTheSignal) {
  const int status = InChild([] {
    StartSignalThread();
    ::kill(::getpid(), SIGTERM);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 0;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(Signals, ClearingTheHandlerRestoresTheDefault) {
  const int status = InChild([] {
    StartSignalThread();
    std::atomic<int> calls{0};
    SetSignalHandler(SIGINT, [&](int) {
      ++calls;
      SetSignalHandler(SIGINT, nullptr);  // as `elastrain train` does: a second Ctrl-C kills
    });
    ::kill(::getpid(), SIGINT);
    for (int i = 0; i < 100 && calls == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (calls != 1) return 20;
    ::kill(::getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 21;
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status << " (20: the handler did not run)";
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

TEST(Signals, ASignalIgnoredAtStartStaysIgnored) {
  const int status = InChild([] {
    ::signal(SIGINT, SIG_IGN);  // as in a background job of a shell script
    StartSignalThread();
    ::kill(::getpid(), SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace elastrain
